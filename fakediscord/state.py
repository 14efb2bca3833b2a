"""The fake's memory: every entity by id, lookups that fail the Discord way, and setup.

Lookups raise :class:`DiscordError` with Discord's code (unknown channel 10003, unknown
message 10008, ...) so routes can simply call them. Nothing here talks to the network or
dispatches events; :mod:`fakediscord.operations` does that on top.
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from fakediscord import errors
from fakediscord._signal import Signal
from fakediscord.models import (
    TEXT_CHANNEL,
    Application,
    ApplicationCommand,
    BotAccount,
    Channel,
    Guild,
    Interaction,
    Member,
    Message,
    Role,
    User,
    Webhook,
)
from fakediscord.permissions import ADMINISTRATOR, ALL, BOT_DEFAULT, EVERYONE_DEFAULT
from fakediscord.snowflake import SnowflakeGenerator, shard_of

__all__ = ["Clock", "State", "SystemClock", "jsonable"]


class Clock(Protocol):
    """Where the fake reads the time (message timestamps, snowflakes)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real UTC clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class State:
    """All entities of one fake Discord, plus the signal that wakes test waiters."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.changed = Signal()
        self.base_url = ""
        """Where the server listens (``http://127.0.0.1:PORT``), set once it started; the
        attachment URLs in payloads point here. Not saved: a restart may pick a new port."""
        self.cdn_base_url: str | None = None
        """Where attachment URLs point instead of :attr:`base_url` (a test's unreachable or
        unresolvable CDN); None: the fake's own file route."""
        self._ids = SnowflakeGenerator()
        self.users: dict[int, User] = {}
        self.bots: dict[str, BotAccount] = {}
        self.applications: dict[int, Application] = {}
        self.guilds: dict[int, Guild] = {}
        self.channels: dict[int, Channel] = {}
        self.messages: dict[int, Message] = {}
        self.channel_messages: dict[int, list[int]] = {}
        self.webhooks: dict[int, Webhook] = {}
        self.commands: dict[int, ApplicationCommand] = {}
        self.interactions: dict[int, Interaction] = {}

    # ids and time

    def now(self) -> datetime:
        return self.clock.now()

    def new_id(self) -> int:
        """A fresh snowflake stamped with the clock's time."""
        return self._ids.next(self.now())

    def reserve_ids_up_to(self, snowflake: int) -> None:
        """New ids will be above ``snowflake`` (a loaded state keeps its ids unique)."""
        self._ids.advance_past(snowflake)

    @staticmethod
    def new_token() -> str:
        """A secret for a webhook or an interaction."""
        return secrets.token_urlsafe(48)

    # setup (the test driver calls these; REST never creates users or guilds)

    def add_user(self, name: str, *, bot: bool = False) -> User:
        user = User(id=self.new_id(), username=name, bot=bot)
        self.users[user.id] = user
        return user

    def add_bot(self, token: str, name: str) -> BotAccount:
        """A bot user with its own application, a member of every guild."""
        if token in self.bots:
            raise ValueError(f"a bot already uses token {token[:6]}…; tokens must be unique")
        user = self.add_user(name, bot=True)
        app = Application(id=user.id, name=name, owner_id=user.id)
        self.applications[app.id] = app
        account = BotAccount(token=token, user_id=user.id, application_id=app.id)
        self.bots[token] = account
        for guild in self.guilds.values():
            self.join(guild, user)
        return account

    def add_guild(
        self, name: str, owner: User | None = None, *, shard: tuple[int, int] | None = None
    ) -> Guild:
        """A guild with an ``@everyone`` role and an owner (a new user unless given); bots join.

        ``shard=(id, count)`` picks an id Discord would route to that shard
        (``(guild_id >> 22) % count == id``), for tests of sharded bots: the next id
        from the clock whose millisecond lands there (at most ``count - 1`` ms ahead).
        """
        if shard is not None and not 0 <= shard[0] < shard[1]:
            raise ValueError(f"shard {shard[0]} of {shard[1]}: the id must be in 0..count-1")
        owner = owner or self.add_user(f"{name} owner")
        guild_id = self.new_id()
        while shard is not None and shard_of(guild_id, shard[1]) != shard[0]:
            self._ids.advance_past((((guild_id >> 22) + 1) << 22) - 1)  # the next millisecond
            guild_id = self.new_id()
        guild = Guild(id=guild_id, name=name, owner_id=owner.id)
        guild.roles[guild_id] = Role(
            id=guild_id, guild_id=guild_id, name="@everyone", permissions=EVERYONE_DEFAULT
        )
        self.guilds[guild_id] = guild
        self.join(guild, owner)
        for account in self.bots.values():
            self.join(guild, self.users[account.user_id])
        return guild

    def join(self, guild: Guild, user: User, *, admin: bool = False) -> Member:
        """Make ``user`` a member; bots get a managed role, admins an Administrator role."""
        role_ids: list[int] = []
        if user.bot:
            role = self._role(guild, user.username, BOT_DEFAULT, managed=True, bot_id=user.id)
            role_ids.append(role.id)
        if admin:
            role_ids.append(self.admin_role(guild).id)
        member = Member(guild_id=guild.id, user_id=user.id, joined_at=self.now(), role_ids=role_ids)
        guild.members[user.id] = member
        return member

    def admin_role(self, guild: Guild) -> Role:
        """The guild's Administrator role, created on first use."""
        for role in guild.roles.values():
            if role.name == "Admin" and role.permissions & ADMINISTRATOR:
                return role
        return self._role(guild, "Admin", ADMINISTRATOR)

    def _role(self, guild: Guild, name: str, permissions: int, **extra: Any) -> Role:
        position = len(guild.roles)
        role = Role(
            id=self.new_id(),
            guild_id=guild.id,
            name=name,
            permissions=permissions,
            position=position,
            **extra,
        )
        guild.roles[role.id] = role
        return role

    def add_channel(self, guild: Guild, name: str, *, type: int = TEXT_CHANNEL) -> Channel:
        position = sum(1 for c in self.channels.values() if c.guild_id == guild.id)
        channel = Channel(
            id=self.new_id(), guild_id=guild.id, type=type, name=name, position=position
        )
        self.channels[channel.id] = channel
        self.channel_messages[channel.id] = []
        return channel

    def add_thread(
        self, parent: Channel, name: str, *, owner_id: int, type: int, thread_id: int | None = None
    ) -> Channel:
        """A thread under ``parent``; a thread started from a message reuses its id."""
        now = self.now()
        thread = Channel(
            id=thread_id or self.new_id(),
            guild_id=parent.guild_id,
            type=type,
            name=name,
            parent_id=parent.id,
            owner_id=owner_id,
            archive_timestamp=now,
            create_timestamp=now,
            member_ids=[owner_id],
        )
        self.channels[thread.id] = thread
        self.channel_messages[thread.id] = []
        return thread

    # lookups that fail like Discord

    def bot_by_token(self, token: str) -> BotAccount | None:
        return self.bots.get(token)

    def bot_by_user(self, user_id: int) -> BotAccount:
        for account in self.bots.values():
            if account.user_id == user_id:
                return account
        raise KeyError(f"no bot with user id {user_id}; add it with fake.add_bot(token)")

    def guild(self, guild_id: int) -> Guild:
        try:
            return self.guilds[guild_id]
        except KeyError:
            raise errors.DiscordError(404, errors.UNKNOWN_GUILD) from None

    def channel(self, channel_id: int) -> Channel:
        try:
            return self.channels[channel_id]
        except KeyError:
            raise errors.DiscordError(404, errors.UNKNOWN_CHANNEL) from None

    def message(self, channel_id: int, message_id: int) -> Message:
        self.channel(channel_id)
        message = self.messages.get(message_id)
        if message is None or message.channel_id != channel_id:
            raise errors.DiscordError(404, errors.UNKNOWN_MESSAGE)
        return message

    def user(self, user_id: int) -> User:
        try:
            return self.users[user_id]
        except KeyError:
            raise errors.DiscordError(404, errors.UNKNOWN_USER) from None

    def member(self, guild_id: int, user_id: int) -> Member:
        member = self.guild(guild_id).members.get(user_id)
        if member is None:
            raise errors.DiscordError(404, errors.UNKNOWN_MEMBER)
        return member

    def webhook(self, webhook_id: int, token: str | None = None) -> Webhook:
        webhook = self.webhooks.get(webhook_id)
        if webhook is None or (
            token is not None and not secrets.compare_digest(token, webhook.token)
        ):
            raise errors.DiscordError(404, errors.UNKNOWN_WEBHOOK)
        return webhook

    def guild_channels(self, guild_id: int) -> list[Channel]:
        return [c for c in self.channels.values() if c.guild_id == guild_id and not c.is_thread]

    def active_threads(self, guild_id: int) -> list[Channel]:
        return [
            c
            for c in self.channels.values()
            if c.guild_id == guild_id and c.is_thread and not c.archived
        ]

    def messages_in(self, channel_id: int, *, include_ephemeral: bool = False) -> list[Message]:
        """The channel's messages, oldest first."""
        found = (self.messages[i] for i in self.channel_messages.get(channel_id, ()))
        return [m for m in found if include_ephemeral or not m.ephemeral]

    def permissions(self, guild_id: int, user_id: int) -> int:
        """The member's guild-level permissions (Administrator implies all of them)."""
        guild = self.guild(guild_id)
        if guild.owner_id == user_id:
            return ALL
        member = guild.members.get(user_id)
        value = guild.roles[guild_id].permissions
        for role_id in member.role_ids if member else ():
            role = guild.roles.get(role_id)
            value |= role.permissions if role else 0
        return ALL if value & ADMINISTRATOR else value

    # persistence

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready data (datetimes as ISO 8601, bytes as base64)."""
        tables: dict[str, dict[Any, Any]] = {
            "users": self.users,
            "bots": self.bots,
            "applications": self.applications,
            "guilds": self.guilds,
            "channels": self.channels,
            "messages": self.messages,
            "webhooks": self.webhooks,
            "commands": self.commands,
            "interactions": self.interactions,
        }
        return {
            name: {str(key): jsonable(dataclasses.asdict(value)) for key, value in table.items()}
            for name, table in tables.items()
        }


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data: datetimes as ISO 8601, bytes as base64."""
    convert: dict[type, Callable[[Any], Any]] = {
        datetime: lambda v: v.isoformat(),
        bytes: lambda v: base64.b64encode(v).decode(),
    }
    if type(value) in convert:
        return convert[type(value)](value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
