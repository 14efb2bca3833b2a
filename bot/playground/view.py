"""What the playground page shows: the guild, its channels, each message as drawn.

Separate from the web routes (:mod:`bot.playground.web`) so the HTTP side is
only requests and responses; this side only reads the fake Discord's state.
Snowflakes leave as strings, as on Discord's wire: JavaScript numbers cannot
hold them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.playground.markdown import Names, render_markdown
from bot.playground.supervisor import BotControl
from core.command_text import help_entries
from fakediscord import (
    MAX_CONTENT,
    MAX_FILE_BYTES,
    MAX_FILES,
    Attachment,
    FakeDiscord,
    Message,
)
from fakediscord.interactions import LOADING
from fakediscord.operations import CHANNEL_PINNED_MESSAGE
from fakediscord.payloads import attachment_url
from fakediscord.permissions import ADMINISTRATOR

__all__ = ["PREVIEWED_IMAGES", "PageView", "World"]

Json = dict[str, Any]
PREVIEWED_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types the page shows as a preview; any other file is a link with its size."""


@dataclass(frozen=True, slots=True)
class World:
    """What the playground created at start: whose guild it is and who can act in it."""

    guild_id: int
    bot_user_id: int
    member_ids: tuple[int, ...]


class PageView:
    """Reads the fake Discord's state into what the page draws."""

    def __init__(self, fake: FakeDiscord, world: World, *, bot: BotControl | None = None) -> None:
        self.fake = fake
        self.world = world
        self.bot = bot

    def bot_status(self) -> Json:
        """The bot as the member list and its controls show it.

        ``presence`` comes from the fake's gateway (online while its connection is
        identified); ``process`` says what the playground did with it (running,
        stopping, stopped) and ``exit_code`` how its last run ended.
        """
        bot = self.fake.state.users[self.world.bot_user_id]
        control = self.bot
        return {
            "id": str(bot.id),
            "name": bot.username,
            "presence": self.fake.presence(bot.id),
            "process": control.state if control is not None else "running",
            "exit_code": control.exit_code if control is not None else None,
            "controls": control is not None,
            "can_kill": bool(control is not None and control.can_kill),
        }

    def snapshot(self) -> Json:
        """The guild, its channels and threads, the users to act as, and the command help."""
        state = self.fake.state
        guild = state.guild(self.world.guild_id)
        channels = sorted(
            (c for c in state.channels.values() if c.guild_id == guild.id),
            key=lambda c: (c.position, c.id),
        )
        users = []
        for user_id in self.world.member_ids:
            user = state.users[user_id]
            admin = state.permissions(guild.id, user_id) & ADMINISTRATOR
            users.append({"id": str(user_id), "name": user.username, "admin": bool(admin)})
        bot = self.bot_status()
        members = [{**bot, "bot": True, "status": bot["presence"]}] + [
            {"id": u["id"], "name": u["name"], "bot": False, "status": "online"} for u in users
        ]
        return {
            "guild": {"id": str(guild.id), "name": guild.name},
            "channels": [
                {
                    "id": str(c.id),
                    "name": c.name,
                    "parent_id": _sid(c.parent_id),
                    "type": c.type,
                    "thread": c.is_thread,
                    "archived": c.archived,
                    "locked": c.locked,
                }
                for c in channels
            ],
            "users": users,
            "roles": [
                {"id": str(r.id), "name": r.name}
                for r in sorted(guild.roles.values(), key=lambda r: -r.position)
                if r.id != guild.id
            ],
            "limits": {"content": MAX_CONTENT, "files": MAX_FILES, "file_bytes": MAX_FILE_BYTES},
            "bot": bot,
            "members": members,
            "commands": [
                {"usage": e.usage, "description": e.description}
                for e in help_entries(self.definitions())
            ],
        }

    def definitions(self) -> list[Json]:
        """Chat-input commands a member of the guild sees (guild ones before global ones)."""
        commands = [
            c
            for c in self.fake.state.commands.values()
            if c.type == 1 and c.guild_id in (self.world.guild_id, None)
        ]
        commands.sort(key=lambda c: c.guild_id is None)
        seen: set[str] = set()
        definitions = []
        for command in commands:
            if command.name not in seen:
                seen.add(command.name)
                definitions.append(command.definition)
        return definitions

    def invoker(self, message: Message) -> int | None:
        interaction = self.fake.state.interactions.get(message.interaction_id or 0)
        return interaction.user_id if interaction is not None else None

    def render(self, message: Message, viewer: int = 0) -> Json:
        """A message as the page draws it: author or persona, content, parts, reactions."""
        state = self.fake.state
        guild = state.guilds.get(message.guild_id or 0)
        if message.webhook_id is not None:
            webhook = state.webhooks.get(message.webhook_id)
            name = message.username or (webhook.name if webhook else "webhook")
            author = {"id": str(message.author_id), "name": name, "bot": True, "webhook": True}
            author["avatar_url"] = message.avatar_url
        else:
            user = state.users.get(message.author_id)
            member = guild.members.get(message.author_id) if guild else None
            name = (member.nick if member else None) or (
                (user.global_name or user.username) if user else "unknown"
            )
            author = {
                "id": str(message.author_id),
                "name": name,
                "bot": bool(user and user.bot),
                "webhook": False,
                "avatar_url": None,
            }
        names = self._names(guild)
        rendered: Json = {
            "id": str(message.id),
            "channel_id": str(message.channel_id),
            "type": message.type,
            "author": author,
            "content": message.content,
            "html": render_markdown(message.content, names),
            "timestamp": message.timestamp.isoformat(),
            "edited": message.edited_timestamp is not None,
            "components": message.components,
            "embeds": [_embed(embed, names) for embed in message.embeds],
            "attachments": [self._attachment(message, a) for a in message.attachments],
            "reactions": [
                {"emoji": r.key, "count": len(r.user_ids), "me": viewer in r.user_ids}
                for r in message.reactions
            ],
            "ephemeral": message.ephemeral,
            "pinned": message.pinned,
            "loading": bool(message.flags & LOADING),
            "thread": None,
            "reference_channel_id": None,
            "reference_message_id": None,
            "interaction": None,
        }
        if message.thread_id is not None and message.thread_id in state.channels:
            thread = state.channels[message.thread_id]
            rendered["thread"] = {"id": str(thread.id), "name": thread.name}
        reference = message.message_reference or {}
        if reference.get("channel_id"):
            rendered["reference_channel_id"] = str(reference["channel_id"])
        if message.type == CHANNEL_PINNED_MESSAGE and reference.get("message_id"):
            rendered["reference_message_id"] = str(reference["message_id"])
        interaction = state.interactions.get(message.interaction_id or 0)
        if interaction is not None and interaction.type == 2:
            invoker = state.users.get(interaction.user_id)
            command = _command_name(interaction.data)
            rendered["interaction"] = {
                "user": invoker.username if invoker else "someone",
                "command": command,
            }
        return rendered

    def _attachment(self, message: Message, attachment: Attachment) -> Json:
        """A file under a message, at the fake Discord's own file route (its CDN)."""
        mime = (attachment.content_type or "").split(";")[0].strip().lower()
        return {
            "id": str(attachment.id),
            "filename": attachment.filename,
            "size": attachment.size,
            "content_type": attachment.content_type,
            "url": attachment_url(self.fake.state, message.channel_id, attachment),
            "image": mime in PREVIEWED_IMAGES,
            "spoiler": attachment.filename.startswith("SPOILER_"),
        }

    def _names(self, guild: Any) -> Names:
        """How the page names mentions: members by nickname, roles, channels."""
        state = self.fake.state

        def user(ident: int) -> str | None:
            member = guild.members.get(ident) if guild else None
            found = state.users.get(ident)
            if member is not None and member.nick:
                return str(member.nick)
            return (found.global_name or found.username) if found else None

        def role(ident: int) -> str | None:
            found = guild.roles.get(ident) if guild else None
            return found.name if found else None

        def channel(ident: int) -> str | None:
            found = state.channels.get(ident)
            return found.name if found else None

        return Names(user=user, role=role, channel=channel)

    def fingerprints(self) -> tuple[Any, dict[int, int]]:
        """A token for the channel list, and one per channel that changes with its messages."""
        state = self.fake.state
        bot = self.bot_status()
        tree = hash(
            tuple(
                (c.id, c.name, c.archived, c.locked, c.parent_id)
                for c in state.channels.values()
                if c.guild_id == self.world.guild_id
            )
            + tuple((c.id, c.version) for c in state.commands.values())
            + ((bot["presence"], bot["process"], bot["exit_code"]),)
        )
        channels: dict[int, int] = {}
        for channel_id, ids in state.channel_messages.items():
            parts = []
            for message_id in ids:
                m = state.messages.get(message_id)
                if m is None:
                    continue
                parts.append(
                    (
                        m.id,
                        m.edited_timestamp,
                        m.flags,
                        m.thread_id,
                        m.pinned,
                        len(m.attachments),
                        tuple((r.key, len(r.user_ids)) for r in m.reactions),
                    )
                )
            channels[channel_id] = hash(tuple(parts))
        return tree, channels


def _sid(value: int | None) -> str | None:
    return None if value is None else str(value)


def _command_name(data: Json) -> str:
    """``agents spawn`` from an interaction's nested options."""
    parts = [str(data.get("name", ""))]
    options = data.get("options") or []
    while options and int(options[0].get("type", 0)) in (1, 2):
        parts.append(str(options[0]["name"]))
        options = options[0].get("options") or []
    return " ".join(parts)


def _embed(embed: Json, names: Names) -> Json:
    """An embed with its description and field values rendered like message text."""
    shown = dict(embed)
    if embed.get("description"):
        shown["description_html"] = render_markdown(str(embed["description"]), names)
    shown["fields"] = [
        {**f, "value_html": render_markdown(str(f.get("value") or ""), names)}
        for f in embed.get("fields") or []
    ]
    return shown
