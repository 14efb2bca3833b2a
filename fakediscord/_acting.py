"""Acting as Discord's users: what people do in the client, turned into gateway events.

Each action changes the state through :class:`Operations` (so it obeys the same rules as
REST) and returns once the resulting events are written to every bot's socket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fakediscord.commands import CommandRegistry, autocomplete_options, build_options, resolve
from fakediscord.gateway import Gateway
from fakediscord.interactions import (
    APPLICATION_COMMAND,
    APPLICATION_COMMAND_AUTOCOMPLETE,
    MESSAGE_COMPONENT,
    InteractionHandle,
    Interactions,
)
from fakediscord.models import Attachment, Channel, Guild, Message, User
from fakediscord.operations import Operations
from fakediscord.state import State

__all__ = ["UserActions", "UserFile", "object_id"]

ENTITY_SELECTS = frozenset({5, 6, 7, 8})
"""User, role, mentionable and channel select menus: their values are ids."""
UserFile = tuple[str, bytes, str | None]
"""A file a user uploads: ``(filename, data, content_type)``."""


def object_id(value: int | Any) -> int:
    """The id of a model (anything with ``.id``) or of an id given directly."""
    return int(getattr(value, "id", value))


class UserActions:
    """The user-side half of :class:`~fakediscord.FakeDiscord` (a mixin)."""

    state: State
    ops: Operations
    gateway: Gateway
    commands: CommandRegistry
    interactions: Interactions
    wait_timeout: float

    def _message(self, message_id: int) -> Message:
        message = self.state.messages.get(message_id)
        if message is None:
            raise KeyError(f"no message {message_id}")
        return message

    async def user_says(
        self,
        channel_id: Channel | int,
        user: User | int,
        content: str = "",
        *,
        files: Sequence[UserFile] | None = None,
        **body: Any,
    ) -> Message:
        """``user`` posts ``content`` (extra REST body keys allowed, e.g. ``embeds``).

        ``files`` are ``(filename, data, content_type)`` tuples uploaded with the message;
        each becomes an :class:`Attachment` served by the fake (its payload ``url``). With
        files, ``content`` may be empty, as in Discord's client.
        """
        attachments = [
            Attachment(
                id=self.state.new_id(),
                filename=filename,
                size=len(data),
                content_type=content_type,
                data=bytes(data),
            )
            for filename, data, content_type in files or ()
        ]
        message = self.ops.post_message(
            object_id(channel_id),
            object_id(user),
            {"content": content, **body},
            attachments=attachments,
        )
        await self.gateway.drain()
        return message

    async def pin(
        self, message_id: Message | int, user: User | int, *, pinned: bool = True
    ) -> None:
        """``user`` pins (or unpins) the message, if Discord would let them (see
        :meth:`Operations.pin`; a refusal raises its :class:`DiscordError`)."""
        self.ops.pin(self._message(object_id(message_id)), object_id(user), pinned=pinned)
        await self.gateway.drain()

    async def react(self, message_id: Message | int, user: User | int, emoji: str) -> None:
        message = self._message(object_id(message_id))
        self.ops.react(message, object_id(user), emoji, add=True)
        await self.gateway.drain()

    async def invoke_command(
        self,
        guild: Guild | int,
        channel_id: Channel | int,
        user: User | int,
        command: str,
        options: dict[str, Any] | None = None,
        *,
        bot: User | int | None = None,
    ) -> InteractionHandle:
        """``user`` runs ``/command`` (``"agents spawn"``: command, group, subcommand)."""
        guild_id = object_id(guild)
        name, *path = command.split()
        registered = self.commands.find(name, guild_id, object_id(bot) if bot is not None else None)
        data_options, resolved = build_options(
            self.state, registered, path, options or {}, guild_id
        )
        data: dict[str, Any] = {
            "id": str(registered.id),
            "name": registered.name,
            "type": 1,
            "options": data_options,
        }
        if resolved:
            data["resolved"] = resolved
        if registered.guild_id is not None:
            data["guild_id"] = str(registered.guild_id)
        interaction = self.interactions.send(
            type=APPLICATION_COMMAND,
            application_id=registered.application_id,
            guild_id=guild_id,
            channel_id=object_id(channel_id),
            user_id=object_id(user),
            data=data,
        )
        await self.gateway.drain()
        return InteractionHandle(self.state, interaction, wait_timeout=self.wait_timeout)

    async def autocomplete(
        self,
        guild: Guild | int,
        channel_id: Channel | int,
        user: User | int,
        command: str,
        typed: dict[str, str],
        *,
        focused: str,
        bot: User | int | None = None,
    ) -> InteractionHandle:
        """``user`` is typing in option ``focused`` of ``/command``; Discord asks the bot
        for choices. ``typed`` is the text in each option so far; the bot's answer is a
        type 8 callback whose ``data.choices`` the client shows."""
        guild_id = object_id(guild)
        name, *path = command.split()
        registered = self.commands.find(name, guild_id, object_id(bot) if bot is not None else None)
        data: dict[str, Any] = {
            "id": str(registered.id),
            "name": registered.name,
            "type": 1,
            "options": autocomplete_options(registered, path, typed, focused),
        }
        if registered.guild_id is not None:
            data["guild_id"] = str(registered.guild_id)
        interaction = self.interactions.send(
            type=APPLICATION_COMMAND_AUTOCOMPLETE,
            application_id=registered.application_id,
            guild_id=guild_id,
            channel_id=object_id(channel_id),
            user_id=object_id(user),
            data=data,
        )
        await self.gateway.drain()
        return InteractionHandle(self.state, interaction, wait_timeout=self.wait_timeout)

    async def click_button(
        self, message_id: Message | int, custom_id: str, user: User | int
    ) -> InteractionHandle:
        """``user`` clicks the button ``custom_id`` on a bot's message."""
        return await self._component(message_id, custom_id, user, {})

    async def select(
        self, message_id: Message | int, custom_id: str, user: User | int, values: list[str]
    ) -> InteractionHandle:
        """``user`` picks ``values`` in the select menu ``custom_id``.

        For a user, role, mentionable or channel select (types 5 to 8) the values are
        ids, and the interaction carries them ``resolved``, as Discord sends them.
        """
        extra: dict[str, Any] = {"values": values}
        message = self._message(object_id(message_id))
        if _find_component(message.components, custom_id)["type"] in ENTITY_SELECTS:
            resolved: dict[str, Any] = {}
            for value in values:
                resolve(self.state, int(value), message.guild_id or 0, resolved)
            extra["resolved"] = resolved
        return await self._component(message_id, custom_id, user, extra)

    async def _component(
        self, message_id: Message | int, custom_id: str, user: User | int, extra: dict[str, Any]
    ) -> InteractionHandle:
        message = self._message(object_id(message_id))
        component = _find_component(message.components, custom_id)
        application_id = message.application_id or message.author_id
        if application_id not in self.state.applications:
            raise LookupError(f"message {message.id} was not sent by an application")
        interaction = self.interactions.send(
            type=MESSAGE_COMPONENT,
            application_id=application_id,
            guild_id=message.guild_id or 0,
            channel_id=message.channel_id,
            user_id=object_id(user),
            data={"custom_id": custom_id, "component_type": component["type"], **extra},
            message=message,
        )
        await self.gateway.drain()
        return InteractionHandle(self.state, interaction, wait_timeout=self.wait_timeout)

    async def archive_thread(self, thread_id: Channel | int, *, locked: bool = False) -> Channel:
        """Archive a thread (as Discord's auto-archive or a moderator would)."""
        thread = self.ops.update_channel(
            self.state.channel(object_id(thread_id)), {"archived": True, "locked": locked}
        )
        await self.gateway.drain()
        return thread

    async def delete_channel(self, channel_id: Channel | int) -> None:
        self.ops.delete_channel(self.state.channel(object_id(channel_id)))
        await self.gateway.drain()

    async def reconnect(self, bot_user_id: User | int) -> None:
        """Send opcode 7 to the bot's connections; discord.py reconnects and RESUMEs."""
        self.gateway.reconnect(object_id(bot_user_id))
        await self.gateway.drain()


def _find_component(components: list[dict[str, Any]], custom_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def walk(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, dict):
                if item.get("custom_id") is not None:
                    found.append(item)
                walk(list(item.get("components") or []))
                if isinstance(item.get("accessory"), dict):
                    walk([item["accessory"]])

    walk(components)
    for component in found:
        if component["custom_id"] == custom_id:
            return component
    known = [c["custom_id"] for c in found]
    raise LookupError(f"no component {custom_id!r} on the message; it has {known}")
