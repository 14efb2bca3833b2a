"""What the fake Discord remembers: plain dataclasses, one per Discord entity.

They hold ids as ``int`` (JSON payloads turn them into strings at the edge, as Discord
does) and only JSON-friendly values, so ``dataclasses.asdict`` of the whole state can be
written to a file; the playground will load it back from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "TEXT_CHANNEL",
    "THREAD_TYPES",
    "Application",
    "ApplicationCommand",
    "Attachment",
    "BotAccount",
    "Channel",
    "Guild",
    "Interaction",
    "InteractionResponse",
    "Member",
    "Message",
    "Reaction",
    "Role",
    "User",
    "Webhook",
]

TEXT_CHANNEL = 0
PUBLIC_THREAD = 11
PRIVATE_THREAD = 12
THREAD_TYPES = frozenset({10, PUBLIC_THREAD, PRIVATE_THREAD})

Json = dict[str, Any]


@dataclass(slots=True)
class User:
    """A Discord account: a person, or the user behind a bot token."""

    id: int
    username: str
    avatar: str | None = None
    bot: bool = False
    global_name: str | None = None


@dataclass(slots=True)
class BotAccount:
    """A bot token and who it authenticates as; each bot is its own application."""

    token: str
    user_id: int
    application_id: int


@dataclass(slots=True)
class Application:
    """The application behind a bot (its id is the bot's user id, as for modern apps)."""

    id: int
    name: str
    owner_id: int
    flags: int = 0


@dataclass(slots=True)
class Role:
    """A guild role; the ``@everyone`` role shares the guild's id."""

    id: int
    guild_id: int
    name: str
    permissions: int
    position: int = 0
    managed: bool = False
    bot_id: int | None = None


@dataclass(slots=True)
class Member:
    """A user's membership in a guild."""

    guild_id: int
    user_id: int
    joined_at: datetime
    role_ids: list[int] = field(default_factory=list)
    nick: str | None = None


@dataclass(slots=True)
class Guild:
    """A server: its roles and members live here, its channels in ``State.channels``."""

    id: int
    name: str
    owner_id: int
    roles: dict[int, Role] = field(default_factory=dict)
    members: dict[int, Member] = field(default_factory=dict)


@dataclass(slots=True)
class Channel:
    """A text channel or a thread (``type`` 11/12, with ``parent_id`` and thread fields)."""

    id: int
    guild_id: int
    type: int
    name: str
    position: int = 0
    parent_id: int | None = None
    topic: str | None = None
    last_message_id: int | None = None
    owner_id: int | None = None
    archived: bool = False
    locked: bool = False
    auto_archive_duration: int = 1440
    archive_timestamp: datetime | None = None
    create_timestamp: datetime | None = None
    message_count: int = 0
    total_message_sent: int = 0
    member_ids: list[int] = field(default_factory=list)
    last_pin_timestamp: datetime | None = None

    @property
    def is_thread(self) -> bool:
        return self.type in THREAD_TYPES


@dataclass(slots=True)
class Reaction:
    """One emoji on a message and who added it."""

    emoji_name: str
    emoji_id: int | None = None
    user_ids: list[int] = field(default_factory=list)

    @property
    def key(self) -> str:
        """How the emoji appears in a route: ``name`` or ``name:id``."""
        return self.emoji_name if self.emoji_id is None else f"{self.emoji_name}:{self.emoji_id}"


@dataclass(slots=True)
class Attachment:
    """A file uploaded with a message (multipart ``files[n]``)."""

    id: int
    filename: str
    size: int
    content_type: str | None = None
    data: bytes = b""


@dataclass(slots=True)
class Message:
    """A message as stored: webhook messages carry the persona they were sent with.

    ``author_id`` is the user id, or the webhook id for webhook and interaction messages
    (``username`` / ``avatar_url`` then hold the display overrides). ``allowed_mentions``
    is kept exactly as received, so tests can assert what the bot asked for.
    """

    id: int
    channel_id: int
    guild_id: int | None
    author_id: int
    content: str
    timestamp: datetime
    type: int = 0
    flags: int = 0
    webhook_id: int | None = None
    application_id: int | None = None
    username: str | None = None
    avatar_url: str | None = None
    embeds: list[Json] = field(default_factory=list)
    components: list[Json] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    allowed_mentions: Json | None = None
    mention_ids: list[int] = field(default_factory=list)
    mention_role_ids: list[int] = field(default_factory=list)
    mention_everyone: bool = False
    edited_timestamp: datetime | None = None
    reactions: list[Reaction] = field(default_factory=list)
    message_reference: Json | None = None
    interaction_id: int | None = None
    thread_id: int | None = None
    ephemeral: bool = False
    tts: bool = False
    nonce: str | int | None = None
    pinned_at: datetime | None = None
    """When it was pinned; None while it is not."""

    @property
    def pinned(self) -> bool:
        return self.pinned_at is not None


@dataclass(slots=True)
class Webhook:
    """An incoming webhook on a (non-thread) channel; ``token`` is its secret."""

    id: int
    channel_id: int
    guild_id: int
    name: str
    token: str
    creator_id: int
    application_id: int | None = None
    avatar: str | None = None


@dataclass(slots=True)
class ApplicationCommand:
    """A registered application command; ``definition`` is the body the bot uploaded."""

    id: int
    application_id: int
    name: str
    type: int
    guild_id: int | None
    definition: Json
    version: int


@dataclass(slots=True)
class InteractionResponse:
    """One thing the bot did with an interaction.

    ``kind`` is ``"callback"`` (``callback_type`` set), ``"edit_original"``,
    ``"delete_original"``, ``"followup"`` or ``"edit_followup"``; ``body`` is the JSON
    the bot sent and ``message_id`` the message it created or changed, if any.
    """

    kind: str
    body: Json
    at: datetime
    callback_type: int | None = None
    message_id: int | None = None


@dataclass(slots=True)
class Interaction:
    """An interaction the fake sent to a bot, and everything the bot answered."""

    id: int
    token: str
    type: int
    application_id: int
    guild_id: int | None
    channel_id: int
    user_id: int
    data: Json
    message_id: int | None = None
    original_message_id: int | None = None
    deferred_thinking: bool = False
    responses: list[InteractionResponse] = field(default_factory=list)

    @property
    def acknowledged(self) -> bool:
        return any(r.kind == "callback" for r in self.responses)
