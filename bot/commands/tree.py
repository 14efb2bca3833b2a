"""``/tree``, ``/rewind``, ``/bookmark`` and ``/export`` inside a bound thread.

Each handler resolves the thread's binding and makes one call to the session's
use cases (:class:`core.control.SessionControl`). Node ids are shown as
8-character prefixes; a command accepts a full id, a bookmark label or a unique
prefix of a conversation node's id (:func:`core.control.resolve_ref`).

``/rewind`` and ``/bookmark`` change the session, so only its owners or an
administrator may use them; ``/tree`` and ``/export`` only read it and are open
to everyone in the thread, who sees the conversation anyway.
"""

from __future__ import annotations

import io
import re
from typing import Any, Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import session_for, uses_of
from core.control import Running, resolve_ref
from core.errors import SessionError
from core.sessions.events import SessionEvent
from core.sessions.export import export_html
from core.sessions.payloads import (
    AssistantMessagePayload,
    ToolResultPayload,
    UserMessagePayload,
)
from core.sessions.tree import SessionTree, TreeNode

__all__ = ["SHORT_ID", "TreeCommands", "render_tree", "resolve_ref"]

SHORT_ID: Final = 8
"""How many characters of a node id the tree shows (and a prefix needs at most)."""

_LIMIT: Final = 2000
_SUMMARY: Final = 60


def _summary(event: SessionEvent) -> str:
    match event.data:
        case UserMessagePayload(text=said):
            text = f"user: {said}"
        case AssistantMessagePayload(text=said, tool_calls=calls):
            names = ", ".join(c.name for c in calls)
            text = f"assistant: {said}" + (f" [calls {names}]" if calls else "")
        case ToolResultPayload(name=name, content=content):
            text = f"tool {name}: {content}"
        case _:
            text = event.type
    text = " ".join(text.split())
    return text if len(text) <= _SUMMARY else text[: _SUMMARY - 1] + "…"


def _marks(node: TreeNode) -> str:
    return f"  🔖 {', '.join(node.bookmarks)}" if node.bookmarks else ""


def _branch_line(node: TreeNode) -> str:
    """One line for a side branch: its first node, its size and the bookmarks inside it."""
    count, labels, stack = 0, [], [node]
    while stack:
        current = stack.pop()
        count += 1
        labels.extend(current.bookmarks)
        stack.extend(current.children)
    more = f" (+{count - 1} more)" if count > 1 else ""
    inside = f"  🔖 {', '.join(labels)}" if labels else ""
    return f"  └ {node.event.node_id[:SHORT_ID]} {_summary(node.event)}{more}{inside}"


def render_tree(tree: SessionTree, /) -> str:
    """The active path, one line per node, with side branches summarised under their fork.

    Fits one Discord message: when too long, the oldest lines are dropped with a note,
    so the head (where the conversation continues) always shows.
    """
    roots = tree.tree()
    if not roots:
        return "This session has no messages yet."
    head = tree.head_id
    header = (
        f"Session `{tree.session_key}` · branch `{tree.active_branch_id}` · "
        f"head `{head[:SHORT_ID] if head else 'start'}` · ▶ = active path"
    )
    lines: list[str] = []
    level: list[TreeNode] = roots
    while level:
        active = next((n for n in level if n.on_active_path), None)
        lines.extend(_branch_line(n) for n in level if n is not active)
        if active is None:
            break
        here = " ← head" if active.event.node_id == head else ""
        lines.append(
            f"▶ {active.event.node_id[:SHORT_ID]} {_summary(active.event)}{_marks(active)}{here}"
        )
        level = active.children
    if head is None:
        lines.append("▶ (head at the start: the next message starts a new root)")
    fence = "```\n{}\n```"
    budget = _LIMIT - len(header) - len(fence) - 80
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    kept.reverse()
    body = fence.format("\n".join(kept))
    dropped = len(lines) - len(kept)
    note = (
        f"\n… {dropped} earlier line(s) not shown; /export has the whole tree." if dropped else ""
    )
    return f"{header}{note}\n{body}"


def _export_name(session_key: str) -> str:
    return re.sub(r"[^\w.-]", "_", session_key) + ".html"


class TreeCommands:
    """The session as a tree: show it, continue from an earlier node, label one, export it."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account
        self.uses = uses_of(account)

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash commands, each calling its method on this object."""
        return [
            app_commands.Command(
                name="tree",
                description="Show this session's conversation tree.",
                callback=self.tree,
            ),
            app_commands.Command(
                name="rewind",
                description="Continue the conversation from an earlier node.",
                callback=self.rewind,
            ),
            app_commands.Command(
                name="bookmark",
                description="Label a node so /rewind can find it.",
                callback=self.bookmark,
            ),
            app_commands.Command(
                name="export",
                description="Download this session's tree as HTML.",
                callback=self.export,
            ),
        ]

    async def tree(self, interaction: discord.Interaction) -> None:
        key = await session_for(self.account, interaction, changes=False)
        if key is None:
            return
        view = await self.uses.sessions.view(key)
        await interaction.response.send_message(render_tree(view.tree), ephemeral=True)

    @app_commands.describe(node="A node id (or its first characters) or a bookmark label.")
    async def rewind(self, interaction: discord.Interaction, node: str) -> None:
        key = await session_for(self.account, interaction, changes=True)
        if key is None:
            return
        try:
            rewound = await self.uses.sessions.rewind(key, node)
        except SessionError as exc:
            await _refuse(interaction, exc)
            return
        if isinstance(rewound, Running):
            await interaction.response.send_message(
                "The agent is running a turn; use /cancel first, then /rewind.", ephemeral=True
            )
            return
        await interaction.response.send_message(_rewound_text(rewound.node_id, rewound.old_text))

    @app_commands.describe(
        node="A node id (or its first characters) or a bookmark label.",
        label="The bookmark's name; a label already in use moves here.",
    )
    async def bookmark(self, interaction: discord.Interaction, node: str, label: str) -> None:
        key = await session_for(self.account, interaction, changes=True)
        if key is None:
            return
        try:
            node_id = await self.uses.sessions.bookmark(key, node, label)
        except SessionError as exc:
            await _refuse(interaction, exc)
            return
        await interaction.response.send_message(
            f"Bookmarked `{node_id[:SHORT_ID]}` as {label.strip()!r}."
        )

    async def export(self, interaction: discord.Interaction) -> None:
        key = await session_for(self.account, interaction, changes=False)
        if key is None:
            return
        tree = (await self.uses.sessions.view(key)).tree
        data = export_html(tree).encode()
        limit = interaction.filesize_limit
        if len(data) > limit:
            await interaction.response.send_message(
                f"The export is {len(data):,} bytes, over this server's {limit:,}-byte "
                "upload limit.",
                ephemeral=True,
            )
            return
        key = tree.session_key
        file = discord.File(io.BytesIO(data), filename=_export_name(key))
        await interaction.response.send_message(f"Session tree of `{key}`.", file=file)


async def _refuse(interaction: discord.Interaction, exc: SessionError) -> None:
    await interaction.response.send_message(str(exc)[:_LIMIT], ephemeral=True)


def _rewound_text(node_id: str, old_text: str | None) -> str:
    """The answer to ``/rewind``: where the conversation goes on, and the replaced
    message's text (fenced, cut to fit) when the rewind went back before one."""
    short = node_id[:SHORT_ID]
    if old_text is None:
        return f"Rewound to `{short}`; the next message here continues from it."
    intro = (
        f"Rewound to just before message `{short}`; your next message here replaces it "
        "on a new branch. Its text, to edit and resend:\n"
    )
    quoted = old_text.replace("```", "`\u200b``")
    room = _LIMIT - len(intro) - 10
    if len(quoted) > room:
        quoted = quoted[: room - 1] + "…"
    return f"{intro}```\n{quoted}\n```"
