"""``/usage`` and ``/model`` in a bound thread: what the session has cost, and its model.

``/usage`` is open to anyone in the thread (reading, like ``/tree``); it answers
privately. ``/model`` without a name shows the session's model; with one it
switches the session among the configured providers' models (``provider`` or
``provider:model``, autocompleted from the config), for the session's owner or
an admin only. The switch is a ``model.changed`` event in the session's log, so
it survives restarts; the next model call uses it and the status line shows it.
A session bound to an external (ACP) agent has the agent's own model and
context: ``/model`` and ``/compact`` say so instead of acting, ``/usage`` shows
what the agent reported.
"""

from __future__ import annotations

from typing import Any, Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import session_for, uses_of
from core.agent.compaction import Compacted, NotCompacted
from core.agent.usage import context_size, usage_text
from core.control import CompactFailed, External, SessionView, UnknownProvider
from core.providers.demo import LABEL as DEMO_LABEL

__all__ = [
    "SessionModelCommands",
    "compact_text",
    "external_text",
    "model_text",
]

_NO_MENTIONS: Final = discord.AllowedMentions.none()
AUTOCOMPLETE_LIMIT: Final = 25
RUNNING: Final = "The agent is running a turn; wait for it to end (or /cancel), then /compact."


def external_text(agent: str, command: str) -> str:
    """Why ``/model`` or ``/compact`` does nothing in an external agent's session."""
    what = {
        "model": "it chooses its own model: set it in that agent's own configuration",
        "compact": "it keeps and compacts its own context",
    }[command]
    return f"This session is the external agent `{agent}` (over ACP); {what}."


def model_text(view: SessionView, configured: list[tuple[str, str]]) -> str:
    """What ``/model`` says answers here: the demo model by name, else the model (the
    one its provider's table names when the session chose none) and what else there is."""
    if view.demo:
        return (
            f"This session's model: the built-in demo model (its answers start with "
            f"`{DEMO_LABEL}`). No provider is configured; add a `[providers.<name>]` table "
            "to config.toml to talk to a real model."
        )
    shown = view.model or dict(configured).get(view.provider) or "the provider's default"
    offered = ", ".join(f"`{p}:{m}`" for p, m in configured) or "none configured"
    return f"This session's model: `{shown}`. Configured: {offered}."


def compact_text(done: Compacted | NotCompacted) -> str:
    """The answer to ``/compact``: the tokens before → after, or why nothing changed."""
    if isinstance(done, Compacted):
        return f"Compacted: {done.tokens_before:,} → {done.tokens_after:,} tokens."
    if done.reason == "too-little":
        return (
            f"Nothing worth compacting yet ({done.tokens:,} tokens): the older conversation is "
            "too short for a summary to save anything. The session is unchanged."
        )
    return (
        f"Nothing compacted: with the summary the context would be {done.with_summary:,} "
        f"tokens, not fewer than the {done.tokens:,} it is now, so the summary was dropped. "
        "The session is unchanged."
    )


class SessionModelCommands:
    """The session's model and what it costs: usage, the model (shown or switched), compaction."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account
        self.uses = uses_of(account)

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash commands, each calling its method on this object."""
        model: app_commands.Command[Any, ..., Any] = app_commands.Command(
            name="model", description="Show or switch this session's model.", callback=self.model
        )
        model.autocomplete("name")(self.model_names)
        return [
            app_commands.Command(
                name="usage",
                description="This session's tokens, cost and context.",
                callback=self.usage,
            ),
            model,
            app_commands.Command(
                name="compact",
                description="Summarise this session's older conversation now.",
                callback=self.compact,
            ),
        ]

    async def usage(self, interaction: discord.Interaction) -> None:
        key = await session_for(self.account, interaction, changes=False)
        if key is None:
            return
        view = await self.uses.sessions.view(key)
        text = usage_text(
            view.tree.total_usage,
            model=view.model,
            context_window=view.context_window,
            external=view.external,
            context=context_size(view.tree),
        )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.describe(name="provider or provider:model from the config; empty: show")
    async def model(self, interaction: discord.Interaction, name: str | None = None) -> None:
        key = await session_for(self.account, interaction, changes=name is not None)
        if key is None:
            return
        sessions = self.uses.sessions
        if name is None:
            view = await sessions.view(key)
            text = (
                external_text(view.external, "model")
                if view.external is not None
                else model_text(view, sessions.models())
            )
            await interaction.response.send_message(text, ephemeral=True)
            return
        provider, _, wanted = name.strip().partition(":")
        switched = await sessions.switch_model(
            key, provider, wanted.strip() or None, by=str(interaction.user.id)
        )
        if isinstance(switched, External):
            await interaction.response.send_message(
                external_text(switched.agent, "model"), ephemeral=True
            )
            return
        if isinstance(switched, UnknownProvider):
            known = ", ".join(f"`{p}`" for p in switched.known) or "none"
            await interaction.response.send_message(
                f"No provider named `{switched.name[:40]}` is configured (known: {known}).",
                ephemeral=True,
                allowed_mentions=_NO_MENTIONS,
            )
            return
        presenter = self.account.presenter_for(key)
        if presenter is not None:
            presenter.refresh_status()
        await interaction.response.send_message(
            f"This session now uses `{switched.model}` ({switched.provider}) from its next "
            "model call.",
            allowed_mentions=_NO_MENTIONS,
        )

    async def model_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        """``/model``'s ``name`` completed: every configured ``provider:model`` containing
        what was typed."""
        choices = [f"{p}:{m}" for p, m in self.uses.sessions.models()]
        wanted = current.lower()
        return [
            app_commands.Choice(name=c[:100], value=c[:100]) for c in choices if wanted in c.lower()
        ][:AUTOCOMPLETE_LIMIT]

    @app_commands.describe(instructions="what the summary should keep or focus on")
    async def compact(
        self, interaction: discord.Interaction, instructions: str | None = None
    ) -> None:
        key = await session_for(self.account, interaction, changes=True)
        if key is None:
            return
        sessions = self.uses.sessions
        view = await sessions.view(key)
        if view.external is not None:
            await interaction.response.send_message(
                external_text(view.external, "compact"), ephemeral=True
            )
            return
        if view.running:
            await interaction.response.send_message(RUNNING, ephemeral=True)
            return
        await interaction.response.defer(thinking=True)
        done = await sessions.compact(key, instructions)
        if isinstance(done, Compacted | NotCompacted):
            text = compact_text(done)
        elif isinstance(done, CompactFailed):
            text = f"Could not compact: {done.reason}"
        else:
            text = external_text(done.agent, "compact")
        await interaction.followup.send(text[:2000], allowed_mentions=_NO_MENTIONS)
