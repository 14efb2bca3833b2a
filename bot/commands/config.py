"""``/config get``, ``/config set`` and ``/config reset``: runtime flag overrides per server.

``key`` is a flag path or any unambiguous end of one: ``spawnSubagentSessions``
is ``channels.discord.threadBindings.spawnSubagentSessions``
(:func:`core.config.find_flag_path`); both ``key`` and ``value`` are
autocompleted. Answers are replies a person reads, never a config-file error:
an unknown key names the flags (and the nearest one), an ambiguous key lists
the keys that would be clear, a wrong value says what the flag takes.

``everywhere:True`` on ``set`` and ``reset`` changes the override every server
inherits (a server's own override still wins in that server); only the bot's
operators (``[discord] operator_ids``) may, since it reaches servers whose
administrators did not ask for it. With several bot processes the change
reaches all of them within a second (:mod:`core.store.changes`).
"""

from __future__ import annotations

from typing import Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import uses_of
from bot.commands.permissions import is_admin
from core.config import (
    FlagValue,
    find_flag_path,
    flag_is_bool,
    overridable_paths,
    shortest_flag_key,
)
from core.errors import ConfigError
from core.flag_text import (
    FlagWords,
    ambiguous_key_text,
    code,
    not_changed_text,
    set_text,
    show,
    value_text,
)
from core.flag_text import empty_key_text as core_empty_key_text
from core.flag_text import source_text as core_source_text
from core.flag_text import unknown_key_text as core_unknown_key_text
from core.overrides import EVERY_SERVER, OverrideOrigin

# is_admin lives in bot.commands.permissions; re-exported for the commands that import it here.
__all__ = [
    "ADMINS_ONLY",
    "EXAMPLE",
    "ConfigGroup",
    "empty_key_text",
    "is_admin",
    "source_text",
    "unknown_key_text",
]

ADMINS_ONLY = "Only server administrators can use this command."
OPERATORS_ONLY = (
    "Only the bot's operators can change a flag for every server "
    "(their user ids are in [discord] operator_ids of the bot's config.toml)."
)
EXAMPLE: Final = "/config set key:spawnSubagentSessions value:on"  # WORDS.example
"""A command that works as typed, for the help texts and the README."""
AUTOCOMPLETE_LIMIT: Final = 25
CHOICE_LIMIT: Final = 100
"""Discord's limit on an autocomplete choice's name and value."""
_BOOL_VALUES: Final = (("on", "on"), ("off", "off"))
_HOUR_VALUES: Final = (
    ("0", "0 (never)"),
    ("1", "1 hour"),
    ("24", "24 hours (a day)"),
    ("168", "168 hours (a week)"),
    ("720", "720 hours (30 days)"),
)
_NO_MENTIONS: Final = discord.AllowedMentions.none()
_KEY_HELP: Final = (
    "A flag: spawnSubagentSessions, scheduledTasks, enabled, idleHours, maxAgeHours, or a full path"
)
"""``key``'s description, the same on get, set and reset."""


WORDS: Final = FlagWords(
    prefix="/",
    place="server",
    mention=lambda actor: f"<@{actor}>" if actor.isdigit() else code(actor),
)
"""Discord's spelling of core's config answers."""
_show = show


def unknown_key_text(key: str) -> str:
    """The reply to a key that names no flag (core's words, Discord's example)."""
    return core_unknown_key_text(key, WORDS)


def empty_key_text(command: str) -> str:
    """The reply to a blank ``key`` (core's words, with ``/``)."""
    return core_empty_key_text(command, WORDS)


class ConfigGroup(
    app_commands.Group,
    name="config",
    description="Read and change this server's runtime flags (administrators).",
    default_permissions=discord.Permissions(administrator=True),
    guild_only=True,
):
    """``/config``: a flag's value here, and this server's (or every server's) override."""

    def __init__(self, account: AccountRuntime) -> None:
        super().__init__()
        self.account = account
        self.uses = uses_of(account)

    @app_commands.command(
        name="get", description="Show a flag's value, e.g. key:spawnSubagentSessions"
    )
    @app_commands.describe(key=_KEY_HELP)
    async def get_flag(self, interaction: discord.Interaction, key: str) -> None:
        if await _refused(interaction):
            return
        path = await self._flag_path(interaction, key)
        if path is None:
            return
        await _reply(interaction, f"`{path}` = {self._shown(str(interaction.guild_id), path)}")

    @app_commands.command(
        name="set",
        description="Override a flag here at once, e.g. key:spawnSubagentSessions value:on",
    )
    @app_commands.describe(
        key=_KEY_HELP,
        value="on or off; for idleHours and maxAgeHours a number of hours (0: never)",
        everywhere="For every server the bot is in (the bot's operators only)",
    )
    async def set_flag(
        self, interaction: discord.Interaction, key: str, value: str, everywhere: bool = False
    ) -> None:
        if await _refused(interaction):
            return
        path = await self._flag_path(interaction, key)
        if path is None:
            return
        scope = await self._scope_for(interaction, everywhere)
        if scope is None:
            return
        overrides = self.uses.overrides
        old = overrides.get(scope, path, account_id=self.account.account_id)
        try:
            stored = await overrides.set(scope, path, value, actor=str(interaction.user.id))
        except ConfigError as exc:
            await _reply(interaction, not_changed_text(path, exc))
            return
        await _reply(interaction, set_text(path, stored, old.value, scope, WORDS))

    @app_commands.command(name="reset", description="Remove this server's override of a flag.")
    @app_commands.describe(
        key=_KEY_HELP,
        everywhere="The override for every server (the bot's operators only)",
    )
    async def reset_flag(
        self, interaction: discord.Interaction, key: str, everywhere: bool = False
    ) -> None:
        if await _refused(interaction):
            return
        path = await self._flag_path(interaction, key)
        if path is None:
            return
        scope = await self._scope_for(interaction, everywhere)
        if scope is None:
            return
        overrides = self.uses.overrides
        if path not in overrides.own(scope):
            await _reply(
                interaction,
                f"`{path}` has no override {_where(scope)}, none is set to remove; "
                f"it is {self._shown(scope, path)}.",
            )
            return
        removed = await overrides.reset(scope, path, actor=str(interaction.user.id))
        await _reply(
            interaction,
            f"`{path}` override `{_show(removed)}` removed {_where(scope)}; "
            f"now {self._shown(scope, path)}.",
        )

    @get_flag.autocomplete("key")
    @set_flag.autocomplete("key")
    @reset_flag.autocomplete("key")
    async def complete_key(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        """Every flag path whose words contain what was typed, with its value here."""
        if interaction.guild_id is None or not is_admin(interaction):
            return []  # the command is for administrators: so are the values it shows
        wanted = current.strip().lower().replace("_", "")
        scope = str(interaction.guild_id) if interaction.guild_id else None
        overrides = self.uses.overrides
        choices = []
        for path in overridable_paths(self.uses.config):
            if wanted and wanted not in path.lower():
                continue
            value = _show(overrides.get(scope, path, account_id=self.account.account_id).value)
            choices.append(app_commands.Choice(name=f"{path} = {value}"[:CHOICE_LIMIT], value=path))
        return choices[:AUTOCOMPLETE_LIMIT]

    @set_flag.autocomplete("value")
    async def complete_value(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        """on / off for a switch, a few hour counts for a window; nothing for no flag yet."""
        key = getattr(interaction.namespace, "key", None)
        path = find_flag_path(self.uses.config, str(key)).path if key else None
        if path is None or interaction.guild_id is None or not is_admin(interaction):
            return []
        offered = _BOOL_VALUES if flag_is_bool(path) else _HOUR_VALUES
        wanted = current.strip().lower()
        return [
            app_commands.Choice(name=label, value=value)
            for value, label in offered
            if not wanted or value.startswith(wanted)
        ]

    async def _flag_path(self, interaction: discord.Interaction, key: str) -> str | None:
        """The flag path ``key`` names; None (after explaining why) when it names none."""
        if not key.strip():
            command = interaction.command.qualified_name if interaction.command else "config get"
            await _reply(interaction, empty_key_text(command))
            return None
        config = self.uses.config
        found = find_flag_path(config, key)
        if found.path is not None:
            return found.path
        if not found.candidates:
            await _reply(interaction, unknown_key_text(key))
            return None
        clear = [shortest_flag_key(config, p) for p in found.candidates]
        await _reply(interaction, ambiguous_key_text(key, clear))
        return None

    async def _scope_for(self, interaction: discord.Interaction, everywhere: bool) -> str | None:
        """The scope to change; None (after answering) when the user may not."""
        if not everywhere:
            return str(interaction.guild_id)
        if interaction.user.id not in self.uses.discord.operator_ids:
            await interaction.response.send_message(OPERATORS_ONLY, ephemeral=True)
            return None
        return EVERY_SERVER

    def _shown(self, scope: str | None, path: str) -> str:
        """The flag's value in ``scope`` and where it comes from, in words."""
        overrides = self.uses.overrides
        flag = overrides.get(scope, path, account_id=self.account.account_id)
        origin = overrides.origin(scope, flag.source) if flag.overridden else None
        return value_text(flag, origin, WORDS)


async def _refused(interaction: discord.Interaction) -> bool:
    """Answer a non-admin (or a DM) ephemerally; True when refused."""
    if interaction.guild_id is None or not is_admin(interaction):
        await interaction.response.send_message(ADMINS_ONLY, ephemeral=True)
        return True
    return False


async def _reply(interaction: discord.Interaction, text: str) -> None:
    await interaction.response.send_message(
        text[:2000], ephemeral=True, allowed_mentions=_NO_MENTIONS
    )


def _where(scope: str) -> str:
    return WORDS.where(scope)


def source_text(flag: FlagValue, origin: OverrideOrigin | None) -> str:
    """Where a flag's value comes from (core's words, Discord's mentions)."""
    return core_source_text(flag, origin, WORDS)
