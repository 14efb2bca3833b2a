"""``/artifacts``: the artifacts of the session bound to this thread."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import NOT_BOUND, binding_here, uses_of
from core.artifacts.registry import EVENT_PREFIX, ArtifactPayload
from core.sessions.events import SessionEvent

__all__ = ["NO_ARTIFACTS", "ArtifactsCommands", "artifact_line", "artifacts_text"]

NO_ARTIFACTS: Final = "This session has no artifacts yet."
_PREVIEW: Final = 80


def _preview(data: object) -> str:
    text = " ".join(json.dumps(data, ensure_ascii=False).split())
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def artifact_line(event: SessionEvent) -> str:
    """Type, id prefix, producer, confirmer, origin count and a short preview of the data."""
    artifact = event.data_as(ArtifactPayload)
    if artifact is None:  # a type this process does not register: named, not shown
        return f"`{event.type.removeprefix(EVENT_PREFIX)}` (not readable by this bot)"
    produced = str(artifact.produced_by)
    if artifact.agent:
        produced += f" ({artifact.agent})"
    confirmed = artifact.confirmed_by
    parts = [
        f"`{artifact.type}` `{artifact.artifact_id[:8]}`",
        f"by {produced}",
        f"confirmed by <@{confirmed}>" if confirmed else "unconfirmed",
        f"{len(artifact.origin)} origin node(s)",
        _preview(artifact.data).replace("`", "'"),
    ]
    return " · ".join(parts)


def artifacts_text(events: Sequence[SessionEvent]) -> str:
    """One line per artifact, cut to one message; :data:`NO_ARTIFACTS` for none."""
    lines = [artifact_line(event) for event in events]
    text = "\n".join(f"- {line}" for line in lines) if lines else NO_ARTIFACTS
    if len(text) > 2000:
        text = text[:1990].rsplit("\n", 1)[0] + "\n- …"
    return text


class ArtifactsCommands:
    """What the session in this thread has produced, as typed artifacts."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account
        self.uses = uses_of(account)

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash command, calling its method on this object."""
        return [
            app_commands.Command(
                name="artifacts",
                description="List this thread's session artifacts.",
                callback=self.artifacts,
            )
        ]

    async def artifacts(self, interaction: discord.Interaction) -> None:
        record = binding_here(self.account, interaction.channel)
        if record is None:
            await interaction.response.send_message(NOT_BOUND, ephemeral=True)
            return
        events = await self.uses.sessions.artifacts(record.target_session_key)
        await interaction.response.send_message(
            artifacts_text(events),
            ephemeral=True,
            allowed_mentions=discord.AllowedMentions.none(),
        )
