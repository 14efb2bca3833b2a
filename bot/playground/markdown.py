"""Discord's markdown, rendered the way Discord renders it, as escaped HTML.

Agents answer in markdown, and the playground must show what Discord shows:
fenced code blocks (with a language tag), inline code, bold, italics,
underline, strikethrough, spoilers, block quotes (``>`` and ``>>>``), lists,
headings (``#`` to ``###``), subtext (``-#``), masked links, and mentions as
pills that never ping. Discord's flavour is its own (underline is ``__``, no
tables, no images, headings need a space, ``>>>`` quotes the rest of the
message), so general markdown libraries render it wrongly in both directions;
this module implements that subset and nothing else.

Safety is structural: every piece of text from a message goes through
:func:`html.escape` at the leaf where it is emitted, and the only tags in the
output are the ones written here. A link's address must be ``http(s)://``
and is escaped as an attribute. ``@everyone`` and ``@here`` stay plain text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

__all__ = ["Names", "render_markdown"]

Lookup = Callable[[int], str | None]


@dataclass(frozen=True, slots=True)
class Names:
    """How mentions are named: a user, a role, a channel by id (None: unknown)."""

    user: Lookup = lambda _id: None
    role: Lookup = lambda _id: None
    channel: Lookup = lambda _id: None


_FENCE = re.compile(r"```(?:([A-Za-z0-9_+.#-]+)\n)?\n?(.*?)```", re.DOTALL)
_HEADING = re.compile(r"^(#{1,3}) (.+)$")
_SUBTEXT = re.compile(r"^-# (.+)$")
_BULLET = re.compile(r"^( *)[-*] (.*)$")
_NUMBERED = re.compile(r"^( *)(\d{1,9})\. (.*)$")

# Inline rules, tried at each position in this order; the earliest match wins.
_INLINE: list[tuple[str, re.Pattern[str]]] = [
    ("code", re.compile(r"(`{1,2})(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)),
    ("escape", re.compile(r"\\([\\*_~|`>#\-\[\]()<@:])")),
    ("link", re.compile(r"\[([^\]\n]+)\]\(<?(https?://[^\s<>)]+)>?\)")),
    ("url", re.compile(r"<?(https?://[^\s<>]*[^\s<>.,:;\"')\]])>?")),
    ("user", re.compile(r"<@!?(\d{1,20})>")),
    ("role", re.compile(r"<@&(\d{1,20})>")),
    ("channel", re.compile(r"<#(\d{1,20})>")),
    ("bold", re.compile(r"\*\*(.+?)\*\*(?!\*)", re.DOTALL)),
    ("underline", re.compile(r"__(.+?)__(?!_)", re.DOTALL)),
    ("italic", re.compile(r"\*(?![\s*])(.+?)(?<![\s\\])\*", re.DOTALL)),
    ("italic", re.compile(r"(?<![A-Za-z0-9])_(?![\s_])(.+?)(?<!\s)_(?![A-Za-z0-9])", re.DOTALL)),
    ("strike", re.compile(r"~~(.+?)~~", re.DOTALL)),
    ("spoiler", re.compile(r"\|\|(.+?)\|\|", re.DOTALL)),
]
_WRAP = {
    "bold": "strong",
    "underline": "u",
    "italic": "em",
    "strike": "s",
}


def render_markdown(text: str, names: Names | None = None) -> str:
    """``text`` (a message's content) as safe HTML, as Discord would show it."""
    names = names or Names()
    out: list[str] = []
    at = 0
    for fence in _FENCE.finditer(text):
        out.append(_blocks(text[at : fence.start()], names))
        language, code = fence.group(1), fence.group(2)
        if code.endswith("\n"):
            code = code[:-1]
        tag = f' data-lang="{escape(language)}"' if language else ""
        out.append(f'<pre class="codeblock"{tag}><code>{escape(code)}</code></pre>')
        at = fence.end()
    out.append(_blocks(text[at:], names))
    return "".join(part for part in out if part)


def _blocks(text: str, names: Names) -> str:
    """Line-level structure: quotes, headings, subtext, lists, plain lines."""
    if not text.strip("\n"):
        return ""
    lines = text.strip("\n").split("\n")
    out: list[str] = []
    paragraph: list[str] = []
    i = 0

    def flush() -> None:
        if paragraph:
            out.append(f'<div class="line">{"<br>".join(paragraph)}</div>')
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith(">>> ") or line == ">>>":
            flush()
            rest = "\n".join([line[4:], *lines[i + 1 :]])
            out.append(f"<blockquote>{_blocks(rest, names)}</blockquote>")
            break
        if line.startswith("> ") or line == ">":
            flush()
            quoted = []
            while i < len(lines) and (lines[i].startswith("> ") or lines[i] == ">"):
                quoted.append(lines[i][2:])
                i += 1
            out.append(f"<blockquote>{_blocks(chr(10).join(quoted), names)}</blockquote>")
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2), names)}</h{level}>")
            i += 1
            continue
        subtext = _SUBTEXT.match(line)
        if subtext:
            flush()
            out.append(f'<div class="subtext">{_inline(subtext.group(1), names)}</div>')
            i += 1
            continue
        if _BULLET.match(line) or _NUMBERED.match(line):
            flush()
            end = i
            while end < len(lines) and (_BULLET.match(lines[end]) or _NUMBERED.match(lines[end])):
                end += 1
            out.append(_list(lines[i:end], names))
            i = end
            continue
        paragraph.append(_inline(line, names))
        i += 1
    flush()
    return "".join(out)


def _list(lines: list[str], names: Names) -> str:
    """Consecutive list lines; two or more spaces of indent nest one level."""
    items: list[tuple[int, bool, str, str]] = []  # depth, ordered, start, text
    for line in lines:
        bullet = _BULLET.match(line)
        if bullet:
            items.append((len(bullet.group(1)) // 2, False, "", bullet.group(2)))
        else:
            numbered = _NUMBERED.match(line)
            assert numbered is not None
            depth = len(numbered.group(1)) // 2
            items.append((depth, True, numbered.group(2), numbered.group(3)))
    return _nest(items, 0, names)


def _nest(items: list[tuple[int, bool, str, str]], depth: int, names: Names) -> str:
    """Items of one depth as lists (a new list where bullets turn to numbers), each
    item followed by its deeper items as a nested list."""
    out: list[str] = []
    tag = ""
    i = 0
    while i < len(items):
        level, ordered, start, text = items[i]
        wanted = "ol" if ordered else "ul"
        if wanted != tag:
            if tag:
                out.append(f"</{tag}>")
            tag = wanted
            numbered = ordered and start not in ("", "1")
            out.append(f'<ol start="{int(start)}">' if numbered else f"<{tag}>")
        j = i + 1
        while j < len(items) and items[j][0] > max(level, depth):
            j += 1
        children = _nest(items[i + 1 : j], depth + 1, names) if j > i + 1 else ""
        out.append(f"<li>{_inline(text, names)}{children}</li>")
        i = j
    if tag:
        out.append(f"</{tag}>")
    return "".join(out)


def _inline(text: str, names: Names) -> str:
    """Spans inside one block: code, escapes, links, mentions, emphasis."""
    out: list[str] = []
    at = 0
    while at < len(text):
        found = _earliest(text, at)
        if found is None:
            break
        kind, match = found
        out.append(escape(text[at : match.start()]))
        out.append(_span(kind, match, names))
        at = match.end()
    out.append(escape(text[at:]))
    return "".join(out)


def _earliest(text: str, at: int) -> tuple[str, re.Match[str]] | None:
    best: tuple[str, re.Match[str]] | None = None
    for kind, pattern in _INLINE:
        match = pattern.search(text, at)
        if match is not None and (best is None or match.start() < best[1].start()):
            best = (kind, match)
    return best


def _span(kind: str, match: re.Match[str], names: Names) -> str:
    if kind == "code":
        return f"<code>{escape(match.group(2))}</code>"
    if kind == "escape":
        return escape(match.group(1))
    if kind == "link":
        href = escape(match.group(2), quote=True)
        label = _inline(match.group(1), names)
        return f'<a href="{href}" target="_blank" rel="noopener noreferrer">{label}</a>'
    if kind == "url":
        href = escape(match.group(1), quote=True)
        return f'<a href="{href}" target="_blank" rel="noopener noreferrer">{href}</a>'
    if kind in ("user", "role", "channel"):
        return _mention(kind, int(match.group(1)), names)
    if kind == "spoiler":
        return f'<span class="spoiler">{_inline(match.group(1), names)}</span>'
    tag = _WRAP[kind]
    return f"<{tag}>{_inline(match.group(1), names)}</{tag}>"


def _mention(kind: str, ident: int, names: Names) -> str:
    if kind == "channel":
        name = names.channel(ident) or "unknown-channel"
        return (
            f'<span class="mention channel-mention" data-channel="{ident}">#{escape(name)}</span>'
        )
    if kind == "role":
        name = names.role(ident) or "unknown-role"
        return f'<span class="mention role-mention">@{escape(name)}</span>'
    name = names.user(ident) or "unknown-user"
    return f'<span class="mention user-mention">@{escape(name)}</span>'
