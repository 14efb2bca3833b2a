"""Registered application commands, and options shaped the way Discord nests them.

discord.py's ``CommandTree`` finds the handler by walking ``data.options``: a subcommand
group (type 2) holds a subcommand (type 1) that holds the arguments. The driver turns
``"agents spawn"`` plus ``{"task": "..."}`` into exactly that shape, typed from the
definition the bot uploaded, and fills ``resolved`` for user/channel/role arguments.
"""

from __future__ import annotations

from typing import Any

from fakediscord import payloads
from fakediscord.errors import UNKNOWN_APPLICATION_COMMAND, DiscordError
from fakediscord.models import ApplicationCommand, Channel, Role, User
from fakediscord.state import State

__all__ = ["CommandRegistry", "autocomplete_options", "build_options", "resolve"]

Json = dict[str, Any]
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL, ROLE, MENTIONABLE, NUMBER = 3, 4, 5, 6, 7, 8, 9, 10


class CommandRegistry:
    """Commands per (application, guild or None for global), with stable ids by name."""

    def __init__(self, state: State) -> None:
        self._state = state

    def registered(self, application_id: int, guild_id: int | None) -> list[ApplicationCommand]:
        return [
            c
            for c in self._state.commands.values()
            if c.application_id == application_id and c.guild_id == guild_id
        ]

    def overwrite(
        self, application_id: int, guild_id: int | None, definitions: list[Json]
    ) -> list[ApplicationCommand]:
        """Bulk overwrite (PUT): the set becomes ``definitions``; same name keeps its id."""
        existing = {(c.name, c.type): c for c in self.registered(application_id, guild_id)}
        kept = [self.upsert(application_id, guild_id, d) for d in definitions]
        for command in existing.values():
            if command not in kept:
                del self._state.commands[command.id]
        self._state.changed.notify()
        return kept

    def upsert(
        self, application_id: int, guild_id: int | None, definition: Json
    ) -> ApplicationCommand:
        name, type_ = str(definition["name"]), int(definition.get("type", 1))
        for command in self.registered(application_id, guild_id):
            if (command.name, command.type) == (name, type_):
                command.definition = definition
                command.version = self._state.new_id()
                return command
        command = ApplicationCommand(
            id=self._state.new_id(),
            application_id=application_id,
            name=name,
            type=type_,
            guild_id=guild_id,
            definition=definition,
            version=self._state.new_id(),
        )
        self._state.commands[command.id] = command
        self._state.changed.notify()
        return command

    def get(self, application_id: int, guild_id: int | None, command_id: int) -> ApplicationCommand:
        command = self._state.commands.get(command_id)
        if command is None or (command.application_id, command.guild_id) != (
            application_id,
            guild_id,
        ):
            raise DiscordError(404, UNKNOWN_APPLICATION_COMMAND)
        return command

    def find(self, name: str, guild_id: int, application_id: int | None) -> ApplicationCommand:
        """The chat-input command ``name`` a user in ``guild_id`` would see.

        Guild commands win over global ones. With several applications, pass the one
        meant; an ambiguous or unknown name raises ``LookupError`` naming what exists.
        """
        candidates = [
            c
            for c in self._state.commands.values()
            if c.name == name
            and c.type == 1
            and c.guild_id in (guild_id, None)
            and application_id in (None, c.application_id)
        ]
        candidates.sort(key=lambda c: c.guild_id is None)
        apps = {c.application_id for c in candidates}
        if not candidates:
            known = sorted({c.name for c in self._state.commands.values()})
            raise LookupError(
                f"no command /{name} is registered (has the tree synced?); known: {known}"
            )
        if len(apps) > 1:
            raise LookupError(f"/{name} is registered by applications {sorted(apps)}; pass bot=")
        return candidates[0]


def build_options(
    state: State,
    command: ApplicationCommand,
    path: list[str],
    values: dict[str, Any],
    guild_id: int,
) -> tuple[list[Json], Json]:
    """``data.options`` and ``data.resolved`` for invoking ``command`` at ``path``.

    ``path`` is the subcommand group/subcommand names after the command's own name;
    ``values`` maps argument names to Python values (models or ids for users, channels
    and roles). Unknown names, missing required arguments and invalid choices raise
    ``ValueError``, since the Discord client would not let a user send them.
    """
    resolved: Json = {}
    chain, definitions = _walk(command, path)
    arguments = [_argument(state, definitions, n, v, guild_id, resolved) for n, v in values.items()]
    missing = [o["name"] for o in definitions if o.get("required") and o["name"] not in values]
    if missing:
        raise ValueError(f"/{command.name} {' '.join(path)} requires {missing}")
    return _nest(chain, arguments), resolved


def autocomplete_options(
    command: ApplicationCommand, path: list[str], typed: dict[str, str], focused: str
) -> list[Json]:
    """``data.options`` of an autocomplete interaction: what the user typed so far.

    As on Discord, every value is the text as typed (whatever the option's type), the
    option being typed in carries ``focused: true``, required options may be missing,
    and only an option the bot registered with ``autocomplete`` can be focused.
    """
    _, definitions = _walk(command, path)
    target = next((o for o in definitions if o["name"] == focused), None)
    if target is None or not target.get("autocomplete"):
        raise ValueError(f"option {focused!r} of /{command.name} has no autocomplete")
    arguments = []
    for name, value in {**typed, focused: typed.get(focused, "")}.items():
        definition = next((o for o in definitions if o["name"] == name), None)
        if definition is None:
            raise ValueError(f"unknown option {name!r}")
        argument: Json = {"type": int(definition["type"]), "name": name, "value": str(value)}
        if name == focused:
            argument["focused"] = True
        arguments.append(argument)
    chain, _ = _walk(command, path)
    return _nest(chain, arguments)


def _walk(command: ApplicationCommand, path: list[str]) -> tuple[list[Json], list[Json]]:
    """The subcommand levels named by ``path`` and the argument definitions at its end."""
    definitions: list[Json] = list(command.definition.get("options") or [])
    chain: list[Json] = []
    for name in path:
        node = next(
            (o for o in definitions if o["name"] == name and o["type"] in (1, 2)),
            None,
        )
        if node is None:
            known = [o["name"] for o in definitions if o["type"] in (1, 2)]
            raise ValueError(f"/{command.name} has no subcommand {name!r}; it has {known}")
        chain.append({"type": node["type"], "name": name, "options": []})
        definitions = list(node.get("options") or [])
    if any(o["type"] in (1, 2) for o in definitions):
        known = [o["name"] for o in definitions]
        raise ValueError(f"/{command.name} {' '.join(path)} needs a subcommand: one of {known}")
    return chain, definitions


def _nest(chain: list[Json], arguments: list[Json]) -> list[Json]:
    options = arguments
    for level in reversed(chain):
        level["options"] = options
        options = [level]
    return options


def _argument(
    state: State, definitions: list[Json], name: str, value: Any, guild_id: int, resolved: Json
) -> Json:
    definition = next((o for o in definitions if o["name"] == name), None)
    if definition is None:
        raise ValueError(f"unknown option {name!r}; options are {[o['name'] for o in definitions]}")
    kind = int(definition["type"])
    if kind in (USER, CHANNEL, ROLE, MENTIONABLE):
        return {"type": kind, "name": name, "value": resolve(state, value, guild_id, resolved)}
    converted = {STRING: str, INTEGER: int, BOOLEAN: bool, NUMBER: float}.get(kind)
    if converted is None:
        raise ValueError(f"option {name!r} has type {kind}, which the fake cannot send yet")
    result = converted(value)
    choices = [c["value"] for c in definition.get("choices") or []]
    if choices and result not in choices:
        raise ValueError(f"{result!r} is not a choice of {name!r}: {choices}")
    return {"type": kind, "name": name, "value": result}


def resolve(state: State, value: Any, guild_id: int, resolved: Json) -> str:
    """Put a user/member, channel or role into ``resolved``; return its id as a string."""
    ident = int(getattr(value, "id", value))
    if isinstance(value, User) or (not isinstance(value, Channel | Role) and ident in state.users):
        resolved.setdefault("users", {})[str(ident)] = payloads.user(state.user(ident))
        member = state.guilds[guild_id].members.get(ident)
        if member is not None:
            permissions = str(state.permissions(guild_id, ident))
            data = payloads.member(state, member, with_user=False) | {"permissions": permissions}
            resolved.setdefault("members", {})[str(ident)] = data
    elif isinstance(value, Channel) or ident in state.channels:
        channel = state.channel(ident)
        everyone = state.guilds[guild_id].roles[guild_id].permissions
        data = payloads.channel(channel) | {"permissions": str(everyone)}
        resolved.setdefault("channels", {})[str(ident)] = data
    else:
        role = state.guilds[guild_id].roles.get(ident)
        if role is None:
            raise ValueError(f"{value!r} is not a known user, channel or role")
        resolved.setdefault("roles", {})[str(ident)] = payloads.role(role)
    return str(ident)
