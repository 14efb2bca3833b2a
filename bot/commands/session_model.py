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
from bot.commands.bound import agent_for
from core.agent.agent import Agent, AgentBusy
from core.agent.compaction import Compacted, NotCompacted
from core.agent.usage import ContextSize, context_size
from core.errors import ProviderError
from core.providers.demo import LABEL as DEMO_LABEL
from core.providers.demo import DemoProvider
from core.sessions.snapshot import UsageTotals

__all__ = [
    "SessionModelCommands",
    "compact_text",
    "external_text",
    "model_text",
    "usage_text",
]

_NO_MENTIONS: Final = discord.AllowedMentions.none()
AUTOCOMPLETE_LIMIT: Final = 25


def usage_text(
    usage: UsageTotals,
    *,
    model: str | None,
    context_window: int,
    external: str | None = None,
    context: ContextSize | None = None,
) -> str:
    """Tokens in (cached) and out, cost, and how full the context is.

    Counts the bot estimated (the model server reported none) are marked ``≈``.
    ``external``: the external agent the session is, which keeps its own context.
    ``context``: the session's :func:`~core.agent.usage.context_size` (by default the
    last call's prompt); after a compaction it is the compaction's own figure, so
    ``/usage`` and ``/compact`` never disagree.
    """
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    approx = "≈" if usage.estimated else ""
    estimated = (
        " (≈: estimated by the bot at four characters a token, where the model server "
        "did not count)"
        if usage.estimated
        else ""
    )
    context = context or ContextSize(usage.last_prompt_tokens)
    share = context.tokens / context_window if context_window else 0.0
    tokens = (
        f"Tokens: {approx}{usage.prompt_tokens:,} in{cached} · "
        f"{approx}{usage.completion_tokens:,} out{estimated}"
    )
    if external is not None:
        return "\n".join(
            [
                f"**Usage of this session** · external agent `{external}`",
                tokens,
                f"Cost: ${usage.cost_usd:.4f}"
                if usage.cost_usd
                else "Cost: unknown (the agent reported none)",
                "Context: kept by the agent itself",
            ]
        )
    lines = [
        "**Usage of this session**" + (f" · model `{model}`" if model else ""),
        tokens,
        f"Cost: ${usage.cost_usd:.4f}" if usage.cost_usd else "Cost: unknown (no prices set)",
        f"Context: ≈{context.tokens:,} of {context_window:,} tokens ({share:.0%}) after the "
        "compaction (the bot's estimate, as /compact reported it; the next model call counts it)"
        if context.compacted
        else f"Context: {context.tokens:,} of {context_window:,} tokens ({share:.0%}) "
        "at the last model call",
    ]
    return "\n".join(lines)


def external_text(agent: str, command: str) -> str:
    """Why ``/model`` or ``/compact`` does nothing in an external agent's session."""
    what = {
        "model": "it chooses its own model: set it in that agent's own configuration",
        "compact": "it keeps and compacts its own context",
    }[command]
    return f"This session is the external agent `{agent}` (over ACP); {what}."


def model_text(agent: Agent, configured: list[tuple[str, str]]) -> str:
    """What ``/model`` says answers here: the demo model by name, else the model (the
    one its provider's table names when the session chose none) and what else there is."""
    if isinstance(agent.provider, DemoProvider):
        return (
            f"This session's model: the built-in demo model (its answers start with "
            f"`{DEMO_LABEL}`). No provider is configured; add a `[providers.<name>]` table "
            "to config.toml to talk to a real model."
        )
    shown = agent.model or dict(configured).get(agent.provider.name) or "the provider's default"
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
        agent = await agent_for(self.account, interaction, changes=False)
        if agent is None:
            return
        text = usage_text(
            agent.tree.total_usage,
            model=agent.model,
            context_window=agent.model_info.context_window,
            external=agent.settings.acp,
            context=context_size(agent.tree),
        )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.describe(name="provider or provider:model from the config; empty: show")
    async def model(self, interaction: discord.Interaction, name: str | None = None) -> None:
        agent = await agent_for(self.account, interaction, changes=name is not None)
        if agent is None:
            return
        if agent.settings.acp is not None:
            await interaction.response.send_message(
                external_text(agent.settings.acp, "model"), ephemeral=True
            )
            return
        factory = self.account.services.agent_factory
        if name is None:
            await interaction.response.send_message(
                model_text(agent, factory.models()), ephemeral=True
            )
            return
        provider_name, _, wanted = name.strip().partition(":")
        configured = dict(factory.models())
        if provider_name not in configured:
            known = ", ".join(f"`{p}`" for p in configured) or "none"
            await interaction.response.send_message(
                f"No provider named `{provider_name[:40]}` is configured (known: {known}).",
                ephemeral=True,
                allowed_mentions=_NO_MENTIONS,
            )
            return
        chosen = wanted.strip() or configured[provider_name]
        provider, info = factory.model_choice(provider_name, chosen)
        await agent.switch_model(
            provider_name, provider, chosen, info, by_user_id=str(interaction.user.id)
        )
        presenter = self.account.presenter_for(agent.session_key)
        if presenter is not None:
            presenter.refresh_status()
        await interaction.response.send_message(
            f"This session now uses `{chosen}` ({provider_name}) from its next model call.",
            allowed_mentions=_NO_MENTIONS,
        )

    async def model_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        """``/model``'s ``name`` completed: every configured ``provider:model`` containing
        what was typed."""
        choices = [f"{p}:{m}" for p, m in self.account.services.agent_factory.models()]
        wanted = current.lower()
        return [
            app_commands.Choice(name=c[:100], value=c[:100]) for c in choices if wanted in c.lower()
        ][:AUTOCOMPLETE_LIMIT]

    @app_commands.describe(instructions="what the summary should keep or focus on")
    async def compact(
        self, interaction: discord.Interaction, instructions: str | None = None
    ) -> None:
        agent = await agent_for(self.account, interaction, changes=True)
        if agent is None:
            return
        if agent.settings.acp is not None:
            await interaction.response.send_message(
                external_text(agent.settings.acp, "compact"), ephemeral=True
            )
            return
        if agent.running:
            await interaction.response.send_message(
                "The agent is running a turn; wait for it to end (or /cancel), then /compact.",
                ephemeral=True,
            )
            return
        await interaction.response.defer(thinking=True)
        try:
            done = await agent.compact(instructions)
        except (AgentBusy, ProviderError) as exc:
            await interaction.followup.send(
                f"Could not compact: {exc}"[:2000], allowed_mentions=_NO_MENTIONS
            )
            return
        await interaction.followup.send(compact_text(done), allowed_mentions=_NO_MENTIONS)
