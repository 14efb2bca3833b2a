"""The session tree as one self-contained HTML page.

Everything the page needs is inline (CSS, a few lines of JS, system fonts);
it makes no network request, so an export can be opened offline and shared
as a single file. Every piece of session content goes through
:func:`html.escape`: model output may contain HTML, and it must show as text.

The conversation is a flat list along its main line (the active path where
it passes); at each fork the other branches are closed ``<details>``, so
only side branches of side branches nest. Rendering uses an explicit stack,
so a path of thousands of nodes cannot exhaust Python's recursion.
"""

from __future__ import annotations

import json
from html import escape
from typing import Final

from core.sessions.events import ADVANCING_KINDS, SessionEvent
from core.sessions.payloads import (
    AssistantMessagePayload,
    CompactionPayload,
    ToolResultPayload,
    UserMessagePayload,
)
from core.sessions.tree import SessionTree

__all__ = ["render_html"]

_EXCERPT: Final = 80
_SYSTEM_TEXT: Final = 300
_ARTIFACT_PREFIX: Final = "artifact."
"""Artifact events (see core.artifacts) name the nodes they were derived from in ``origin``;
matched by prefix so that sessions need not import the artifact registry."""

_CSS: Final = """
:root{--bg:#fff;--fg:#1d1f23;--muted:#6a6f78;--line:#d9dce1;--act:#e9f3ff;--actb:#2f74d0;
--user:#0b6b3a;--asst:#5a3fc0;--tool:#8a5a00;--steer:#b3261e;--fup:#2f74d0;--bm:#fff4c2}
@media (prefers-color-scheme:dark){:root{--bg:#16181c;--fg:#e6e8eb;--muted:#9aa0a9;
--line:#30343b;--act:#1b2a3d;--actb:#6aa7ff;--user:#5fd39a;--asst:#b3a2ff;--tool:#e0b35c;
--steer:#ff8a80;--fup:#6aa7ff;--bm:#4a4220}}
*{box-sizing:border-box}body{margin:0;padding:1rem 1.5rem;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
h1{font-size:1.3rem;margin:0 0 .3rem}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace}
.meta,.sum{color:var(--muted)}.controls{margin:.6rem 0}button{margin-right:.4rem}
ol.chain{list-style:none;margin:0;padding:0 0 0 .8rem;border-left:2px solid var(--line)}
li.node{margin:.35rem 0;padding:.35rem .6rem;border-radius:6px}
li.node.active{background:var(--act);border-left:3px solid var(--actb)}
.hd{font-size:12px;color:var(--muted)}.hd .kind{font-weight:600}
.k-user .kind{color:var(--user)}.k-assistant .kind{color:var(--asst)}
.k-tool_boundary .kind{color:var(--tool)}
.badge{display:inline-block;padding:0 .35rem;margin-left:.3rem;border-radius:4px;
border:1px solid var(--line);font-size:11px}
.steer{color:var(--steer);border-color:var(--steer)}.follow_up{color:var(--fup);border-color:var(--fup)}
.bm{background:var(--bm)}.head{font-weight:700;color:var(--actb);border-color:var(--actb)}
pre.text{white-space:pre-wrap;word-break:break-word;margin:.25rem 0 0;font:inherit}
ul.calls,ul.sys{margin:.2rem 0 0;padding-left:1.2rem;font-size:12px}
ul.sys{color:var(--muted)}body.nosys ul.sys{display:none}
details{margin:.3rem 0 .3rem .2rem}details>summary{cursor:pointer;color:var(--muted)}
li.fork{list-style:none;margin:.3rem 0}
.art{color:var(--asst);border-color:var(--asst)}
ul.arts{margin:.2rem 0 0;padding-left:1.2rem;font-size:12px;color:var(--asst)}
"""

_JS: Final = """
document.addEventListener('click',function(e){var a=e.target.getAttribute('data-act');
if(!a)return;if(a==='sys'){document.body.classList.toggle('nosys');return;}
document.querySelectorAll('details').forEach(function(d){d.open=(a==='expand');});});
function reveal(){var id=location.hash.slice(1);if(!id)return;var n=document.getElementById(id);
for(var p=n;p;p=p.parentElement){if(p.tagName==='DETAILS')p.open=true;}
if(n)n.scrollIntoView();}
window.addEventListener('hashchange',reveal);reveal();
"""


def _excerpt(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node_text(event: SessionEvent) -> str:
    match event.data:
        case UserMessagePayload(text=text) | AssistantMessagePayload(text=text):
            return text
        case ToolResultPayload(content=content):
            return content
        case CompactionPayload() as compaction:
            return (
                f"🗜️ compaction ({compaction.tokens_before} → {compaction.tokens_after} "
                f"tokens; the model reads from node {str(compaction.first_kept_node_id)[:8]} "
                f"on):\n{compaction.summary}"
            )
    return json.dumps(event.payload, ensure_ascii=False, indent=1)


# Artifact payloads are read as stored: their model belongs to core.artifacts, a layer
# above this one (see _ARTIFACT_PREFIX).
def _origin(event: SessionEvent) -> list[str]:
    origin = event.payload.get("origin")
    if not isinstance(origin, list):
        return []
    return [str(node_id) for node_id in dict.fromkeys(origin) if node_id]


def _artifact_line(event: SessionEvent) -> str:
    """One derived artifact on its origin node: type, id, who produced and confirmed it, data."""
    payload = event.payload
    kind = escape(str(payload.get("type") or event.type.removeprefix(_ARTIFACT_PREFIX)))
    artifact_id = escape(str(payload.get("artifact_id") or "")[:8])
    who = f" by {escape(str(payload.get('produced_by') or '?'))}"
    if payload.get("agent"):
        who += f" ({escape(str(payload['agent']))})"
    if payload.get("confirmed_by"):
        who += f", confirmed by {escape(str(payload['confirmed_by']))}"
    data = json.dumps(payload.get("data"), ensure_ascii=False)
    return (
        f"<li>📎 artifact <b>{kind}</b> <code>{artifact_id}</code>{who}: "
        f"<code>{escape(_excerpt(data, _SYSTEM_TEXT))}</code> (#{event.seq})</li>"
    )


class _Page:
    """State for one rendering: lookups computed once, output gathered in a list."""

    def __init__(self, tree: SessionTree) -> None:
        self.tree = tree
        self.out: list[str] = []
        self.on_path = {event.node_id for event in tree.path()}
        self.labels: dict[str, list[str]] = {}
        for label, node_id in tree.bookmarks.items():
            self.labels.setdefault(node_id, []).append(label)
        self.branch_heads: dict[str, list[str]] = {}
        for branch, head in tree.branches.items():
            if head is not None:  # a branch with no node yet heads nothing to mark
                self.branch_heads.setdefault(head, []).append(branch)
        self.system: dict[str | None, list[SessionEvent]] = {}
        for event in tree.events:
            if event.kind not in ADVANCING_KINDS:
                self.system.setdefault(event.parent_id, []).append(event)
        self.derived: dict[str, list[SessionEvent]] = {}
        for event in tree.events:
            if event.type.startswith(_ARTIFACT_PREFIX):
                for node_id in _origin(event):
                    self.derived.setdefault(node_id, []).append(event)

    def render(self) -> str:
        tree = self.tree
        key = escape(tree.session_key)
        head = escape(tree.head_id or "none")
        self.out.append(
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Session {key}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>Session <code>{key}</code></h1>"
            f'<p class="meta">{len(tree)} events · active branch '
            f"<b>{escape(tree.active_branch_id)}</b> · head <code>{head}</code></p>"
        )
        self._summary()
        self.out.append(
            '<div class="controls"><button data-act="expand">Expand all</button>'
            '<button data-act="collapse">Collapse all</button>'
            '<button data-act="sys">Show/hide system events</button></div></header><main>'
        )
        self._system_list(None)
        self._conversation(tree.roots())
        self.out.append(f"</main><script>{_JS}</script></body></html>\n")
        return "".join(self.out)

    def _summary(self) -> None:
        parts = [
            f"{escape(branch)} → {self._link(node_id)}"
            for branch, node_id in self.tree.branches.items()
        ]
        marks = [
            f'<span class="badge bm">{escape(label)}</span> → {self._link(node_id)}'
            for label, node_id in sorted(self.tree.bookmarks.items())
        ]
        self.out.append(f'<p class="sum">Branches: {", ".join(parts)}</p>')
        if marks:
            self.out.append(f'<p class="sum">Bookmarks: {", ".join(marks)}</p>')

    def _link(self, node_id: str | None) -> str:
        if node_id is None:
            return "<i>start</i>"
        return f'<a href="#n-{escape(node_id)}"><code>{escape(node_id[:8])}</code></a>'

    def _conversation(self, roots: list[SessionEvent]) -> None:
        # The stack holds literal HTML (str) and chains still to render:
        # (first event, whether it continues the <ol> already open).
        stack: list[str | tuple[SessionEvent, bool]] = []
        if roots:
            self.out.append('<ol class="chain">')
            self._fork(roots, stack, on_path=True)  # the start is on every path
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                self.out.append(item)
            else:
                self._chain(*item, stack)

    def _chain(
        self, start: SessionEvent, inline: bool, stack: list[str | tuple[SessionEvent, bool]]
    ) -> None:
        """Render ``start`` and its single-child successors; a fork is pushed, not recursed."""
        if not inline:
            self.out.append('<ol class="chain">')
        event = start
        while True:
            self._node(event)
            kids = self.tree.children(event.node_id)
            on_path = event.node_id in self.on_path
            if len(kids) == 1 and (not on_path or kids[0].node_id in self.on_path):
                event = kids[0]
                continue
            if kids:
                self._fork(kids, stack, on_path=on_path)
            else:
                self.out.append("</ol>")
            return

    def _fork(
        self,
        kids: list[SessionEvent],
        stack: list[str | tuple[SessionEvent, bool]],
        *,
        on_path: bool,
    ) -> None:
        """Side branches become closed ``<details>`` here; the main line continues inline.

        The main line is the child on the active path, so the active path is
        never nested and the page stays flat however many forks it has
        (browsers cap element nesting at a few hundred levels). Where the
        active path ends, every child is a side branch; off the active path
        the oldest child carries on.
        """
        main = next((kid for kid in kids if kid.node_id in self.on_path), None)
        if main is None and not on_path:
            main = kids[0]
        stack.append((main, True) if main is not None else "</ol>")
        sides = [kid for kid in kids if kid is not main]
        for number, kid in reversed(list(enumerate(sides, 1))):
            summary = (
                f"side branch {number} of {len(sides)}: #{kid.seq} {escape(kid.kind)} "
                f"“{escape(_excerpt(_node_text(kid), _EXCERPT))}”"
            )
            stack.append("</details></li>")
            stack.append((kid, False))
            stack.append(f'<li class="fork"><details class="branch"><summary>{summary}</summary>')

    def _node(self, event: SessionEvent) -> None:
        node_id = event.node_id
        classes = f"node k-{escape(event.kind)}" + (" active" if node_id in self.on_path else "")
        badges = []
        if event.delivery_mode is not None:
            mode = escape(event.delivery_mode)
            badges.append(f'<span class="badge {mode}">{mode.replace("_", "-")}</span>')
        badges.extend(
            f'<span class="badge bm">🔖 {escape(label)}</span>'
            for label in self.labels.get(node_id, ())
        )
        badges.extend(
            f'<span class="badge">{escape(branch)} head</span>'
            for branch in self.branch_heads.get(node_id, ())
        )
        if node_id == self.tree.head_id:
            badges.append('<span class="badge head">HEAD</span>')
        derived = self.derived.get(node_id, ())
        badges.extend(
            f'<span class="badge art">📎 {escape(str(artifact.payload.get("type")))}</span>'
            for artifact in derived
        )
        self.out.append(
            f'<li class="{classes}" id="n-{escape(node_id)}"><div class="hd">#{event.seq} '
            f'<span class="kind">{escape(event.kind)}</span> {escape(event.type)}'
            f" <code>{escape(node_id[:8])}</code>{''.join(badges)}</div>"
            f'<pre class="text">{escape(_node_text(event))}</pre>'
        )
        self._tool_calls(event)
        if derived:
            lines = "".join(_artifact_line(artifact) for artifact in derived)
            self.out.append(f'<ul class="arts">{lines}</ul>')
        self._system_list(node_id)
        self.out.append("</li>")

    def _tool_calls(self, event: SessionEvent) -> None:
        reply = event.data_as(AssistantMessagePayload)
        if reply is None or not reply.tool_calls:
            return
        items = "".join(
            f"<li><code>{escape(call.name)}</code>(<code>{escape(call.arguments)}</code>)</li>"
            for call in reply.tool_calls
        )
        self.out.append(f'<ul class="calls">{items}</ul>')

    def _system_list(self, parent_id: str | None) -> None:
        events = self.system.get(parent_id)
        if not events:
            return
        items = "".join(
            f"<li>#{event.seq} {escape(event.type)} <code>"
            f"{escape(_excerpt(json.dumps(event.payload, ensure_ascii=False), _SYSTEM_TEXT))}"
            "</code></li>"
            for event in events
        )
        self.out.append(f'<ul class="sys">{items}</ul>')


def render_html(tree: SessionTree) -> str:
    """The page for ``tree``; see the module docstring for what it promises."""
    return _Page(tree).render()
