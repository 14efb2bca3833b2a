"""The HTML export marks each artifact on the nodes it was derived from."""

from __future__ import annotations

import re

import core.artifacts.builtin as _builtin
from core.artifacts import ArtifactService
from core.sessions import SessionLog, export_html
from tests.fixtures.sessions import reply, say

del _builtin  # registers brief and note

_SCRIPT = "<script>alert(1)</script>"


def _node(page: str, node_id: str) -> str:
    """The HTML of one node, up to the next node."""
    start = page.index(f'id="n-{node_id}"')
    following = page.find('<li class="node', start)
    return page[start : following if following != -1 else len(page)]


class TestArtifactsInHtml:
    async def test_artifacts_are_marked_on_their_origin_nodes(self, log: SessionLog) -> None:
        """A brief derived from two messages shows on both; a note only on its own node."""
        tree = await log.load("agent:main:export-artifacts")
        first = await say(log, tree, "plan a trip")
        second = await reply(log, tree, "where to?")
        third = await say(log, tree, "nowhere in particular")
        artifacts = ArtifactService(log)
        brief = await artifacts.produce_confirmed(
            tree,
            type="brief",
            data={"title": f"Trip {_SCRIPT}", "summary": "somewhere warm"},
            origin=[first.node_id, second.node_id],
            confirmed_by="user:42",
            agent="scout",
        )
        note = await artifacts.emit_from_model(
            tree,
            type="note",
            data={"text": "likes warm places"},
            origin=[second.node_id],
            agent="scout",
            allowed_types={"note"},
        )
        page = export_html(tree)

        brief_id = brief.payload["artifact_id"][:8]
        note_id = note.payload["artifact_id"][:8]
        on_first, on_second = _node(page, first.node_id), _node(page, second.node_id)
        assert brief_id in on_first
        assert note_id not in on_first
        assert brief_id in on_second
        assert note_id in on_second
        assert 'class="arts"' not in _node(page, third.node_id)
        assert on_first.count('class="badge art"') == 1
        assert on_second.count('class="badge art"') == 2
        assert "confirmed by user:42" in on_first
        assert "by system (scout)" in on_first
        assert "by model (scout)" in on_second

    async def test_artifact_data_is_escaped_and_the_page_self_contained(
        self, log: SessionLog
    ) -> None:
        """Artifact data containing HTML shows as text; still no network reference."""
        tree = await log.load("agent:main:export-artifacts-2")
        first = await say(log, tree, "hello")
        await ArtifactService(log).produce_confirmed(
            tree,
            type="brief",
            data={"title": _SCRIPT, "summary": "<img src=x>"},
            origin=[first.node_id],
            confirmed_by="<b>me</b>",
        )
        page = export_html(tree)
        assert _SCRIPT not in page
        assert "<img" not in page
        assert "<b>me</b>" not in page
        assert "confirmed by &lt;b&gt;me&lt;/b&gt;" in page
        assert page.count("<script>") == 1
        assert not re.search(r"https?://", page)
