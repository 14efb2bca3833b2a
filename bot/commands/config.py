"""``/config get``, ``/config set`` and ``/config reset``: runtime flag overrides per server.

``everywhere:True`` on ``set`` and ``reset`` changes the override every server
inherits (a server's own override still wins in that server); only the bot's
operators (``[discord] operator_ids``) may, since it reaches servers whose
administrators did not ask for it. With several bot processes the change
reaches all of them within a second (:mod:`core.store.changes`).
"""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from bot.account import AccountRuntime
from bot.commands.permissions import is_admin
from core.config import RUNTIME_SOURCE, overridable_paths
from core.errors import ConfigError
from core.overrides import EVERY_SERVER

# is_admin lives in bot.commands.permissions; re-exported for the commands that import it here.
__all__ = ["ADMINS_ONLY", "config_group", "is_admin"]

ADMINS_ONLY = "Only server administrators can use this command."
OPERATORS_ONLY = (
    "Only the bot's operators can change a flag for every server "
    "(their user ids are in [discord] operator_ids of the bot's config.toml)."
)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "(none)" if value is None else str(value)


def config_group(account: AccountRuntime) -> app_commands.Group:
    group = app_commands.Group(
        name="config",
        description="Read and change this server's runtime flags (administrators).",
        default_permissions=discord.Permissions(administrator=True),
        guild_only=True,
    )
    overrides = account.services.overrides

    def known(key: str) -> bool:
        return key in overridable_paths(account.services.config)

    async def refuse(interaction: discord.Interaction) -> bool:
        """Answer a non-admin (or a DM) ephemerally; True when refused."""
        if interaction.guild_id is None or not is_admin(interaction):
            await interaction.response.send_message(ADMINS_ONLY, ephemeral=True)
            return True
        return False

    async def error(interaction: discord.Interaction, exc: ConfigError) -> None:
        await interaction.response.send_message(str(exc)[:2000], ephemeral=True)

    @group.command(name="get", description="Show a flag's effective value and where it comes from.")
    @app_commands.describe(key="Dotted flag path, e.g. channels.discord.threadBindings.enabled")
    async def get_command(interaction: discord.Interaction, key: str) -> None:
        if await refuse(interaction):
            return
        try:
            if not known(key):
                paths = ", ".join(overridable_paths(account.services.config))
                raise ConfigError(RUNTIME_SOURCE, key, f"a flag path, one of {paths}", "unknown")
            flag = overrides.get(str(interaction.guild_id), key, account_id=account.account_id)
        except ConfigError as exc:
            await error(interaction, exc)
            return
        note = " (runtime override)" if flag.overridden else ""
        await interaction.response.send_message(
            f"`{key}` = `{_show(flag.value)}` (source: `{flag.source}`){note}", ephemeral=True
        )

    async def scope_for(interaction: discord.Interaction, everywhere: bool) -> str | None:
        """The scope to change; None (after answering) when the user may not."""
        if not everywhere:
            return str(interaction.guild_id)
        if interaction.user.id not in account.services.config.discord.operator_ids:
            await interaction.response.send_message(OPERATORS_ONLY, ephemeral=True)
            return None
        return EVERY_SERVER

    def where(scope: str) -> str:
        return "for every server" if scope == EVERY_SERVER else "in this server"

    @group.command(name="set", description="Override a flag in this server, at once.")
    @app_commands.describe(
        key="Dotted flag path",
        value="New value, e.g. on, off or a number",
        everywhere="For every server the bot is in (the bot's operators only)",
    )
    async def set_command(
        interaction: discord.Interaction, key: str, value: str, everywhere: bool = False
    ) -> None:
        if await refuse(interaction):
            return
        scope = await scope_for(interaction, everywhere)
        if scope is None:
            return
        old = overrides.get(scope, key, account_id=account.account_id) if known(key) else None
        try:
            stored = await overrides.set(scope, key, value, actor=str(interaction.user.id))
        except ConfigError as exc:
            await error(interaction, exc)
            return
        was = f" (was `{_show(old.value)}`)" if old is not None else ""
        await interaction.response.send_message(
            f"`{key}` set to `{_show(stored)}`{was} {where(scope)}.", ephemeral=True
        )

    @group.command(name="reset", description="Remove this server's override of a flag.")
    @app_commands.describe(
        key="Dotted flag path",
        everywhere="The override for every server (the bot's operators only)",
    )
    async def reset_command(
        interaction: discord.Interaction, key: str, everywhere: bool = False
    ) -> None:
        if await refuse(interaction):
            return
        scope = await scope_for(interaction, everywhere)
        if scope is None:
            return
        try:
            removed = await overrides.reset(scope, key, actor=str(interaction.user.id))
            now = overrides.get(scope, key, account_id=account.account_id)
        except ConfigError as exc:
            await error(interaction, exc)
            return
        await interaction.response.send_message(
            f"`{key}` override `{_show(removed)}` removed; now `{_show(now.value)}` "
            f"(source: `{now.source}`).",
            ephemeral=True,
        )

    return group
