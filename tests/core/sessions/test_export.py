"""Exports: JSON that round-trips, and one self-contained, escaped HTML page."""

from __future__ import annotations

import json
import re

import pytest

from core.errors import SessionError
from core.sessions import (
    SessionLog,
    SessionTree,
    export_html,
    export_json,
    import_into,
    import_json,
)
from core.store import Database
from tests.fixtures.sessions import build_branched, reply, say, system

_SCRIPT = "<script>alert('pwned')</script>"


async def _session(log: SessionLog) -> SessionTree:
    tree = await log.load("agent:main:s1")
    first = await say(log, tree, "hello")
    await reply(log, tree, f"here is html: {_SCRIPT}")
    await log.continue_from(tree, first.node_id)
    await say(log, tree, "steer this way", mode="steer")
    await reply(
        log,
        tree,
        "calling",
        tool_calls=[{"id": "c1", "name": "fetch<x>", "arguments": '{"q": "<img>"}'}],
    )
    await log.append(
        tree,
        "tool_result",
        {"turn_id": "t1", "tool_call_id": "c1", "name": "fetch", "content": "</pre><b>x</b>"},
    )
    await log.bookmark(tree, first.node_id, "the <start>")
    await system(log, tree, "message_queued", item_id="f1", mode="follow_up", text="later")
    return tree


class TestJson:
    async def test_round_trip(self, log: SessionLog) -> None:
        """import_json(export_json(tree)) is an equal tree with an equal snapshot."""
        tree = await _session(log)
        again = import_json(export_json(tree))
        assert again == tree
        assert again.snapshot() == tree.snapshot()
        assert again.path() == tree.path()

    async def test_import_into_the_store(self, log: SessionLog, database: Database) -> None:
        """An imported tree is stored and loads back equal."""
        text = export_json(await _session(log))
        fresh = SessionLog(database)
        with pytest.raises(SessionError, match="already has events"):
            await import_into(fresh, text)
        copy = await import_into(fresh, text, session_key="copy")
        loaded = await fresh.load("copy")
        assert loaded == copy
        original = import_json(text)
        assert [e.payload for e in loaded.path()] == [e.payload for e in original.path()]
        assert set(copy.bookmarks) == {"the <start>"}
        assert {e.node_id for e in copy.events}.isdisjoint(e.node_id for e in original.events)

    async def test_node_ids_stay_unique_in_the_store(self, log: SessionLog) -> None:
        """An export renamed by hand, its node ids already stored, is refused whole."""
        document = json.loads(export_json(await _session(log)))
        document["session_key"] = "renamed"
        for event in document["events"]:
            event["session_key"] = "renamed"
        with pytest.raises(SessionError, match="already in this store"):
            await import_into(log, json.dumps(document))
        assert await log.session_keys() == ["agent:main:s1"]

    def test_tampered_exports_are_refused(self) -> None:
        """A declared head the events do not produce, or another format, is refused."""
        tree = build_branched("s", path_nodes=6, side_every=3, side_nodes=2)
        document = json.loads(export_json(tree))
        document["head_node_id"] = document["events"][0]["node_id"]
        with pytest.raises(SessionError, match="edited or is damaged"):
            import_json(json.dumps(document))
        with pytest.raises(SessionError, match="format"):
            import_json(json.dumps({"format": "other"}))
        document = json.loads(export_json(tree))
        document["events"][0]["kind"] = "assistant"
        with pytest.raises(SessionError, match="has kind 'assistant'"):
            import_json(json.dumps(document))


class TestHtml:
    async def test_content_is_escaped(self, log: SessionLog) -> None:
        """Model output containing HTML is shown as text, never as markup."""
        page = export_html(await _session(log))
        assert _SCRIPT not in page
        assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
        assert "<b>x</b>" not in page
        assert "<img>" not in page
        assert "the &lt;start&gt;" in page
        assert page.count("<script>") == 1

    async def test_page_is_self_contained(self, log: SessionLog) -> None:
        """No network references: no URLs, no external scripts, styles or fonts."""
        page = export_html(await _session(log))
        assert "http://" not in page
        assert "https://" not in page
        assert not re.search(r"<(link|img|iframe)\b", page)
        assert not re.search(r"\ssrc=", page)
        assert "@import" not in page
        assert page.startswith("<!doctype html>")

    async def test_page_shows_the_tree(self, log: SessionLog) -> None:
        """Side branches are collapsed; modes, bookmarks, head and active path are marked."""
        tree = await _session(log)
        page = export_html(tree)
        assert page.count("<details") == 1
        assert "<details open" not in page
        assert '<span class="badge steer">steer</span>' in page
        assert 'class="badge bm"' in page
        assert "HEAD" in page
        assert page.count('class="node k-') == len([e for e in tree.events if e.kind != "system"])
        for event in tree.path():
            assert f'active" id="n-{event.node_id}"' in page

    def test_deep_tree_renders(self) -> None:
        """A long path with many forks renders flat, without recursion."""
        tree = build_branched("s", path_nodes=3_000, side_every=2, side_nodes=1)
        page = export_html(tree)
        # 1,500 side branches, the last one after the head: each collapsed, none nested.
        assert page.count("<details") == 1_500
        depth = deepest = 0
        for tag in re.findall(r"</?ol\b", page):
            depth += -1 if tag.startswith("</") else 1
            deepest = max(deepest, depth)
        assert (depth, deepest) == (0, 2)
