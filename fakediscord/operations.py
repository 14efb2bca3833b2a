"""State changes with Discord's rules and their gateway events, shared by REST and the driver.

A user message from the test driver and a bot message from REST go through the same
:meth:`Operations.post_message`, so both obey the same thread rules (an archived thread
unarchives on a send unless it is locked, 50083) and both are echoed on the gateway to
every bot that can see them, the author included, as Discord does.
"""

from __future__ import annotations

from typing import Any

from fakediscord import payloads
from fakediscord._content import (
    MAX_CONTENT,
    ROLE_MENTION,
    USER_MENTION,
    form_error,
    mentioned,
    parses,
    validate,
    validate_files,
)
from fakediscord.errors import (
    MAX_PINS,
    MISSING_PERMISSIONS,
    THREAD_ARCHIVED,
    UNKNOWN_EMOJI,
    WRONG_CHANNEL_TYPE,
    DiscordError,
)
from fakediscord.gateway import Gateway, Intents
from fakediscord.models import (
    Attachment,
    Channel,
    Guild,
    Message,
    Reaction,
    Role,
    User,
    Webhook,
)
from fakediscord.permissions import PIN_MESSAGES
from fakediscord.state import State

__all__ = ["CHANNEL_PINNED_MESSAGE", "MAX_PINNED", "THREAD_CREATED", "Operations"]

Json = dict[str, Any]
THREAD_CREATED = 18
CHANNEL_PINNED_MESSAGE = 6
MAX_PINNED = 50
"""Pins a channel (or thread) may hold at once."""
"""Message type of the system message Discord posts in a parent channel for a new thread."""


class Operations:
    """Mutations of one fake Discord; each dispatches the events Discord would."""

    def __init__(self, state: State, gateway: Gateway) -> None:
        self.state = state
        self.gateway = gateway

    # messages

    def post_message(
        self,
        channel_id: int,
        author_id: int,
        body: Json,
        *,
        webhook: Webhook | None = None,
        attachments: list[Attachment] | None = None,
        type: int = 0,
        application_id: int | None = None,
        interaction_id: int | None = None,
        ephemeral: bool = False,
    ) -> Message:
        """Create a message from a REST-style body (content, embeds, components, ...)."""
        channel = self.state.channel(channel_id)
        attachments = attachments or []
        validate(body, has_files=bool(attachments), allow_empty=type != 0)
        validate_files([a.size for a in attachments])
        self.unarchive_for_send(channel)
        content = str(body.get("content") or "")
        allowed = body.get("allowed_mentions")
        message = Message(
            id=self.state.new_id(),
            channel_id=channel.id,
            guild_id=channel.guild_id,
            author_id=webhook.id if webhook else author_id,
            content=content,
            timestamp=self.state.now(),
            type=type,
            flags=int(body.get("flags") or 0),
            webhook_id=webhook.id if webhook else None,
            application_id=webhook.application_id if webhook else application_id,
            username=(body.get("username") or webhook.name) if webhook else None,
            avatar_url=body.get("avatar_url") if webhook else None,
            embeds=list(body.get("embeds") or []),
            components=list(body.get("components") or []),
            attachments=attachments,
            allowed_mentions=allowed,
            mention_ids=mentioned(USER_MENTION, content, allowed, "users"),
            mention_role_ids=mentioned(ROLE_MENTION, content, allowed, "roles"),
            mention_everyone="@everyone" in content and parses(allowed, "everyone"),
            message_reference=body.get("message_reference"),
            interaction_id=interaction_id,
            ephemeral=ephemeral,
            tts=bool(body.get("tts")),
            nonce=body.get("nonce"),
        )
        self.state.messages[message.id] = message
        self.state.channel_messages.setdefault(channel.id, []).append(message.id)
        channel.last_message_id = message.id
        if channel.is_thread and type != THREAD_CREATED:
            channel.message_count += 1
            channel.total_message_sent += 1
        if not ephemeral:
            self._dispatch_message("MESSAGE_CREATE", message)
        self.state.changed.notify()
        return message

    def edit_message(self, message: Message, body: Json) -> Message:
        """Apply a PATCH body; an archived thread refuses edits (50083)."""
        channel = self.state.channel(message.channel_id)
        if channel.is_thread and channel.archived:
            raise DiscordError(400, THREAD_ARCHIVED)
        if "content" in body:
            content = str(body["content"] or "")
            if len(content) > MAX_CONTENT:
                raise form_error("content", f"Must be {MAX_CONTENT} or fewer in length.")
            message.content = content
            allowed = body.get("allowed_mentions", message.allowed_mentions)
            message.mention_ids = mentioned(USER_MENTION, content, allowed, "users")
            message.mention_role_ids = mentioned(ROLE_MENTION, content, allowed, "roles")
            message.mention_everyone = "@everyone" in content and parses(allowed, "everyone")
        for key in ("embeds", "components"):
            if key in body:
                setattr(message, key, list(body[key] or []))
        if "allowed_mentions" in body:
            message.allowed_mentions = body["allowed_mentions"]
        if "flags" in body and body["flags"] is not None:
            message.flags = int(body["flags"])
        if "attachments" in body and not body["attachments"]:
            message.attachments = []
        message.edited_timestamp = self.state.now()
        if not message.ephemeral:
            self._dispatch_message("MESSAGE_UPDATE", message)
        self.state.changed.notify()
        return message

    def delete_message(self, message: Message) -> None:
        """Remove a message; bots see MESSAGE_DELETE (ephemeral ones vanish silently)."""
        self.state.messages.pop(message.id, None)
        ids = self.state.channel_messages.get(message.channel_id, [])
        if message.id in ids:
            ids.remove(message.id)
        channel = self.state.channels.get(message.channel_id)
        if channel is not None and channel.is_thread and message.type != THREAD_CREATED:
            channel.message_count = max(channel.message_count - 1, 0)
        if not message.ephemeral:
            data = {"id": str(message.id), "channel_id": str(message.channel_id)}
            if message.guild_id is not None:
                data["guild_id"] = str(message.guild_id)
            self.gateway.dispatch(
                "MESSAGE_DELETE",
                lambda _: data,
                guild_id=message.guild_id,
                intent=Intents.GUILD_MESSAGES,
            )
        self.state.changed.notify()

    def _dispatch_message(self, event: str, message: Message) -> None:
        def render(viewer: int) -> Json:
            data = payloads.message(self.state, message, viewer_id=viewer)
            data["guild_id"] = str(message.guild_id)
            guild = self.state.guilds.get(message.guild_id or 0)
            member = guild.members.get(message.author_id) if guild else None
            if member is not None and message.webhook_id is None:
                data["member"] = payloads.member(self.state, member, with_user=False)
            return data

        self.gateway.dispatch(
            event, render, guild_id=message.guild_id, intent=Intents.GUILD_MESSAGES, message=message
        )

    # pins

    def pin(self, message: Message, user_id: int, *, pinned: bool) -> None:
        """Pin or unpin ``message`` as ``user_id``, with Discord's rules and events.

        It takes Pin Messages (a thread has its parent's rights; its creator gets
        none more), an open thread (50083 when archived) and a free place among the
        channel's :data:`MAX_PINNED` pins (30003). A pin posts the CHANNEL_PINNED_MESSAGE
        line (type 6) pointing at the message; both fire CHANNEL_PINS_UPDATE. Pinning a
        pinned message (or unpinning one that is not) changes nothing.
        """
        channel = self.state.channel(message.channel_id)
        if channel.guild_id is not None and not (
            self.state.permissions(channel.guild_id, user_id) & PIN_MESSAGES
        ):
            raise DiscordError(403, MISSING_PERMISSIONS)
        if channel.is_thread and channel.archived:
            raise DiscordError(400, THREAD_ARCHIVED)
        if message.pinned == pinned:
            return
        if pinned:
            if len(self.pins(channel.id)) >= MAX_PINNED:
                raise DiscordError(400, MAX_PINS)
            message.pinned_at = self.state.now()
        else:
            message.pinned_at = None
        newest = max((m.pinned_at for m in self.pins(channel.id) if m.pinned_at), default=None)
        channel.last_pin_timestamp = newest
        data: Json = {
            "channel_id": str(channel.id),
            "guild_id": str(channel.guild_id),
            "last_pin_timestamp": payloads.timestamp(newest),
        }
        self.gateway.dispatch(
            "CHANNEL_PINS_UPDATE", lambda _: data, guild_id=channel.guild_id, intent=Intents.GUILDS
        )
        if pinned:
            reference = {
                "channel_id": str(channel.id),
                "guild_id": str(channel.guild_id),
                "message_id": str(message.id),
            }
            self.post_message(
                channel.id, user_id, {"message_reference": reference}, type=CHANNEL_PINNED_MESSAGE
            )
        self.state.changed.notify()

    def pins(self, channel_id: int) -> list[Message]:
        """The channel's pinned messages, the most recently pinned first."""
        pinned = [m for m in self.state.messages_in(channel_id) if m.pinned_at is not None]
        return sorted(pinned, key=lambda m: m.pinned_at or m.timestamp, reverse=True)

    # reactions

    def react(self, message: Message, user_id: int, emoji: str, *, add: bool) -> None:
        """Add or remove ``user_id``'s reaction (``emoji`` as in the route: name or name:id)."""
        name, _, raw_id = emoji.partition(":")
        if not name:
            raise DiscordError(400, UNKNOWN_EMOJI)
        emoji_id = int(raw_id) if raw_id.isdigit() else None
        reaction = next((r for r in message.reactions if r.key == emoji), None)
        if add:
            if reaction is None:
                reaction = Reaction(emoji_name=name, emoji_id=emoji_id)
                message.reactions.append(reaction)
            if user_id in reaction.user_ids:
                return
            reaction.user_ids.append(user_id)
        else:
            if reaction is None or user_id not in reaction.user_ids:
                return
            reaction.user_ids.remove(user_id)
            if not reaction.user_ids:
                message.reactions.remove(reaction)
        data: Json = {
            "user_id": str(user_id),
            "channel_id": str(message.channel_id),
            "message_id": str(message.id),
            "guild_id": str(message.guild_id),
            "emoji": {"id": None if emoji_id is None else str(emoji_id), "name": name},
            "burst": False,
            "type": 0,
        }
        guild = self.state.guilds.get(message.guild_id or 0)
        if add:
            data["message_author_id"] = str(message.author_id)
            member = guild.members.get(user_id) if guild else None
            if member is not None:
                data["member"] = payloads.member(self.state, member)
        event = "MESSAGE_REACTION_ADD" if add else "MESSAGE_REACTION_REMOVE"
        self.gateway.dispatch(
            event, lambda _: data, guild_id=message.guild_id, intent=Intents.GUILD_MESSAGE_REACTIONS
        )
        self.state.changed.notify()

    # channels and threads

    def create_channel(self, guild: Guild, name: str) -> Channel:
        channel = self.state.add_channel(guild, name)
        self.gateway.dispatch(
            "CHANNEL_CREATE",
            lambda _: payloads.channel(channel),
            guild_id=guild.id,
            intent=Intents.GUILDS,
        )
        self.state.changed.notify()
        return channel

    def create_thread(
        self,
        parent: Channel,
        name: str,
        owner_id: int,
        *,
        type: int = 11,
        auto_archive_duration: int | None = None,
        starter: Message | None = None,
    ) -> Channel:
        """A thread under a text channel; without a starter message Discord posts a
        THREAD_CREATED system message (type 18) in the parent channel."""
        if parent.is_thread:
            raise DiscordError(400, WRONG_CHANNEL_TYPE)
        thread = self.state.add_thread(
            parent, name, owner_id=owner_id, type=type, thread_id=starter.id if starter else None
        )
        if auto_archive_duration:
            thread.auto_archive_duration = int(auto_archive_duration)
        joined = self.state.now()

        def render(viewer: int) -> Json:
            data = payloads.channel(thread) | {"newly_created": True}
            if viewer in thread.member_ids:
                data["member"] = payloads.thread_member(thread, viewer, joined)
            return data

        self.gateway.dispatch(
            "THREAD_CREATE", render, guild_id=thread.guild_id, intent=Intents.GUILDS
        )
        if starter is not None:
            starter.thread_id = thread.id
        elif type == 11:
            reference = {"channel_id": str(thread.id), "guild_id": str(thread.guild_id)}
            self.post_message(
                parent.id,
                owner_id,
                {"content": name, "message_reference": reference},
                type=THREAD_CREATED,
            )
        self.state.changed.notify()
        return thread

    def update_channel(self, channel: Channel, changes: Json) -> Channel:
        """Apply a PATCH body: name/topic, and archived/locked/auto_archive on threads."""
        if changes.get("name"):
            channel.name = str(changes["name"])
        if "topic" in changes and not channel.is_thread:
            channel.topic = changes["topic"]
        if channel.is_thread:
            if "locked" in changes and changes["locked"] is not None:
                channel.locked = bool(changes["locked"])
            if "archived" in changes and changes["archived"] is not None:
                if channel.archived != bool(changes["archived"]):
                    channel.archive_timestamp = self.state.now()
                channel.archived = bool(changes["archived"])
            if changes.get("auto_archive_duration"):
                channel.auto_archive_duration = int(changes["auto_archive_duration"])
        event = "THREAD_UPDATE" if channel.is_thread else "CHANNEL_UPDATE"
        self.gateway.dispatch(
            event,
            lambda _: payloads.channel(channel),
            guild_id=channel.guild_id,
            intent=Intents.GUILDS,
        )
        self.state.changed.notify()
        return channel

    def unarchive_for_send(self, channel: Channel) -> None:
        """A send into an archived thread reopens it, unless it is locked (50083)."""
        if not (channel.is_thread and channel.archived):
            return
        if channel.locked:
            raise DiscordError(400, THREAD_ARCHIVED)
        self.update_channel(channel, {"archived": False})

    def delete_channel(self, channel: Channel) -> None:
        """Delete a channel (with its threads, messages and webhooks) or a thread."""
        doomed = [channel]
        if not channel.is_thread:
            doomed += [c for c in self.state.channels.values() if c.parent_id == channel.id]
        for gone in doomed:
            self.state.channels.pop(gone.id, None)
            for message_id in self.state.channel_messages.pop(gone.id, []):
                self.state.messages.pop(message_id, None)
        for webhook in [w for w in self.state.webhooks.values() if w.channel_id == channel.id]:
            del self.state.webhooks[webhook.id]
        if channel.is_thread:
            data = {
                "id": str(channel.id),
                "guild_id": str(channel.guild_id),
                "parent_id": str(channel.parent_id),
                "type": channel.type,
            }
            self.gateway.dispatch(
                "THREAD_DELETE", lambda _: data, guild_id=channel.guild_id, intent=Intents.GUILDS
            )
        else:
            self.gateway.dispatch(
                "CHANNEL_DELETE",
                lambda _: payloads.channel(channel),
                guild_id=channel.guild_id,
                intent=Intents.GUILDS,
            )
        self.state.changed.notify()

    # roles

    def set_role_permissions(self, role: Role, permissions: int) -> None:
        """Change what a role allows (GUILD_ROLE_UPDATE tells the bots)."""
        role.permissions = permissions
        data = {"guild_id": str(role.guild_id), "role": payloads.role(role)}
        self.gateway.dispatch(
            "GUILD_ROLE_UPDATE", lambda _: data, guild_id=role.guild_id, intent=Intents.GUILDS
        )
        self.state.changed.notify()

    # webhooks and members

    def create_webhook(self, channel: Channel, creator_id: int, name: str) -> Webhook:
        if channel.is_thread:
            raise DiscordError(400, WRONG_CHANNEL_TYPE)
        creator = self.state.users[creator_id]
        webhook = Webhook(
            id=self.state.new_id(),
            channel_id=channel.id,
            guild_id=channel.guild_id,
            name=name,
            token=self.state.new_token(),
            creator_id=creator_id,
            application_id=creator_id if creator.bot else None,
        )
        self.state.webhooks[webhook.id] = webhook
        self._webhooks_update(webhook)
        return webhook

    def delete_webhook(self, webhook: Webhook) -> None:
        self.state.webhooks.pop(webhook.id, None)
        self._webhooks_update(webhook)

    def _webhooks_update(self, webhook: Webhook) -> None:
        data = {"guild_id": str(webhook.guild_id), "channel_id": str(webhook.channel_id)}
        self.gateway.dispatch(
            "WEBHOOKS_UPDATE",
            lambda _: data,
            guild_id=webhook.guild_id,
            intent=Intents.GUILD_WEBHOOKS,
        )
        self.state.changed.notify()

    def add_member(self, guild: Guild, user: User, *, admin: bool = False) -> None:
        self.state.join(guild, user, admin=admin)
        self.announce_member(guild, user.id)

    def announce_member(self, guild: Guild, user_id: int) -> None:
        """Tell connected bots that ``user_id`` joined (GUILD_MEMBER_ADD)."""
        member = guild.members[user_id]
        data = payloads.member(self.state, member) | {"guild_id": str(guild.id)}
        self.gateway.dispatch(
            "GUILD_MEMBER_ADD", lambda _: data, guild_id=guild.id, intent=Intents.GUILD_MEMBERS
        )
        self.state.changed.notify()

    def announce_guild(self, guild: Guild) -> None:
        """Tell connected bots they joined ``guild`` (GUILD_CREATE)."""
        self.gateway.dispatch(
            "GUILD_CREATE",
            lambda _: payloads.guild_create(self.state, guild),
            guild_id=guild.id,
            intent=None,
        )
        self.state.changed.notify()
