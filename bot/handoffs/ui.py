"""What the handoff buttons share: their custom ids and how answers are sent.

The buttons are plain components here (a ``custom_id`` is all Discord keeps,
written by :data:`HANDOFF_ID` and :data:`BRIEF_ID`); :mod:`bot.handoffs.views`
registers the :class:`bot.presses.PressButton` classes that understand a press
from that id alone, restart or not.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import discord

from bot.presses import ButtonId, account_of
from core.handoffs.brief import display_name

__all__ = [
    "BRIEF_ID",
    "BRIEF_LABEL",
    "HANDOFF_ID",
    "NOT_YOURS",
    "NO_MENTIONS",
    "Action",
    "account_of",
    "brief_button",
    "brief_view",
    "display_name",
    "handoff_button",
    "offer_view",
    "say",
    "stopped",
]

NO_MENTIONS: Final = discord.AllowedMentions.none()

HANDOFF_ID: Final = ButtonId(
    "handoff", (("action", "accept|reject"), ("handoff_id", "[0-9a-f]{32}"))
)
BRIEF_ID: Final = ButtonId("brief", (("binding_id", "[0-9a-f]{32}"),))
BRIEF_LABEL: Final = "Ready — produce the brief"

NOT_YOURS: Final = (
    "Only the person who started this session or a server administrator can use this button."
)

Action = Literal["accept", "reject"]


async def say(interaction: discord.Interaction, text: str) -> None:
    """An ephemeral answer, whether or not the interaction was acknowledged yet."""
    if interaction.response.is_done():
        await interaction.followup.send(text[:2000], ephemeral=True, allowed_mentions=NO_MENTIONS)
    else:
        await interaction.response.send_message(
            text[:2000], ephemeral=True, allowed_mentions=NO_MENTIONS
        )


def stopped(*items: discord.ui.Item[Any]) -> discord.ui.View:
    """A view holding ``items``, stopped before it is sent: no view is kept in memory, so
    every press is dispatched by the registered dynamic items, as after a restart."""
    view = discord.ui.View(timeout=None)
    for item in items:
        view.add_item(item)
    view.stop()
    return view


def handoff_button(
    action: Action, handoff_id: str, *, disabled: bool = False
) -> discord.ui.Button[Any]:
    return discord.ui.Button(
        label="Accept" if action == "accept" else "Reject",
        style=discord.ButtonStyle.success if action == "accept" else discord.ButtonStyle.danger,
        custom_id=HANDOFF_ID.format(action=action, handoff_id=handoff_id),
        disabled=disabled,
    )


def brief_button(binding_id: str, *, disabled: bool = False) -> discord.ui.Button[Any]:
    return discord.ui.Button(
        label=BRIEF_LABEL,
        style=discord.ButtonStyle.primary,
        custom_id=BRIEF_ID.format(binding_id=binding_id),
        disabled=disabled,
    )


def offer_view(handoff_id: str, *, disabled: bool = False) -> discord.ui.View:
    """Accept and Reject for one offered handoff."""
    return stopped(
        handoff_button("accept", handoff_id, disabled=disabled),
        handoff_button("reject", handoff_id, disabled=disabled),
    )


def brief_view(binding_id: str, *, disabled: bool = False) -> discord.ui.View:
    return stopped(brief_button(binding_id, disabled=disabled))
