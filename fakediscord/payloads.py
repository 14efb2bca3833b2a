"""Entities rendered as Discord API v10 JSON, the way discord.py parses them.

discord.py reads many keys with ``data[...]`` deep inside its ``parse_*`` and model
constructors, so a missing key is a ``KeyError`` far from its cause. Every payload here
carries the keys discord.py 2.7 reads unconditionally (noted where it is not obvious).
Snowflakes are strings, as on the wire.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from fakediscord.models import (
    Application,
    ApplicationCommand,
    Attachment,
    Channel,
    Guild,
    Member,
    Message,
    Role,
    User,
    Webhook,
)
from fakediscord.state import State

__all__ = [
    "ATTACHMENTS",
    "application",
    "application_command",
    "attachment",
    "attachment_url",
    "channel",
    "guild_create",
    "member",
    "message",
    "role",
    "timestamp",
    "user",
    "webhook",
]

Json = dict[str, Any]
ATTACHMENTS = "/attachments"
"""Path prefix under which the fake serves attachment files (Discord's CDN layout)."""


def timestamp(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _sid(value: int | None) -> str | None:
    return None if value is None else str(value)


def user(entity: User) -> Json:
    """A user object; ``discriminator`` and ``avatar`` are read unconditionally."""
    return {
        "id": str(entity.id),
        "username": entity.username,
        "global_name": entity.global_name,
        "discriminator": "0",
        "avatar": entity.avatar,
        "bot": entity.bot,
        "public_flags": 0,
        "flags": 0,
    }


def role(entity: Role) -> Json:
    return {
        "id": str(entity.id),
        "name": entity.name,
        "permissions": str(entity.permissions),
        "position": entity.position,
        "color": 0,
        "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
        "hoist": False,
        "managed": entity.managed,
        "mentionable": False,
        "flags": 0,
        "icon": None,
        "unicode_emoji": None,
        **({"tags": {"bot_id": str(entity.bot_id)}} if entity.bot_id else {}),
    }


def member(state: State, entity: Member, *, with_user: bool = True) -> Json:
    """A guild member; ``roles`` and ``flags`` are read unconditionally."""
    payload: Json = {
        "roles": [str(r) for r in entity.role_ids],
        "nick": entity.nick,
        "avatar": None,
        "joined_at": timestamp(entity.joined_at),
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "pending": False,
        "flags": 0,
        "communication_disabled_until": None,
    }
    if with_user:
        payload["user"] = user(state.users[entity.user_id])
    return payload


def channel(entity: Channel, *, with_guild_id: bool = True) -> Json:
    """A text channel, or a thread with ``thread_metadata`` and its counters."""
    payload: Json = {
        "id": str(entity.id),
        "type": entity.type,
        "name": entity.name,
        "last_message_id": _sid(entity.last_message_id),
        "last_pin_timestamp": timestamp(entity.last_pin_timestamp),
        "flags": 0,
        "rate_limit_per_user": 0,
        "nsfw": False,
    }
    if with_guild_id:
        payload["guild_id"] = str(entity.guild_id)
    if not entity.is_thread:
        payload |= {
            "position": entity.position,
            "parent_id": None,
            "topic": entity.topic,
            "permission_overwrites": [],
            "default_auto_archive_duration": 1440,
        }
        return payload
    payload |= {
        "parent_id": str(entity.parent_id),
        "owner_id": str(entity.owner_id),
        "message_count": entity.message_count,
        "total_message_sent": entity.total_message_sent,
        "member_count": len(entity.member_ids),
        "thread_metadata": {
            "archived": entity.archived,
            "locked": entity.locked,
            "auto_archive_duration": entity.auto_archive_duration,
            "archive_timestamp": timestamp(entity.archive_timestamp),
            "create_timestamp": timestamp(entity.create_timestamp),
            "invitable": True,
        },
    }
    return payload


def thread_member(entity: Channel, user_id: int, joined: datetime) -> Json:
    """The ``member`` of a thread payload: the viewer's own membership."""
    return {
        "id": str(entity.id),
        "user_id": str(user_id),
        "join_timestamp": timestamp(joined),
        "flags": 0,
    }


def guild_create(state: State, entity: Guild) -> Json:
    """The GUILD_CREATE payload: everything ``Guild._from_data`` caches at startup.

    ``member_count`` equals the members sent, so discord.py considers the guild chunked
    and never asks for members at startup.
    """
    channels = state.guild_channels(entity.id)
    return {
        "id": str(entity.id),
        "name": entity.name,
        "icon": None,
        "owner_id": str(entity.owner_id),
        "unavailable": False,
        "large": False,
        "lazy": True,
        "member_count": len(entity.members),
        "joined_at": timestamp(state.now()),
        "roles": [role(r) for r in entity.roles.values()],
        "members": [member(state, m) for m in entity.members.values()],
        "channels": [channel(c, with_guild_id=False) for c in channels],
        "threads": [channel(t) for t in state.active_threads(entity.id)],
        "emojis": [],
        "stickers": [],
        "features": [],
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "system_channel_id": None,
        "system_channel_flags": 0,
        "preferred_locale": "en-US",
        "premium_tier": 0,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "afk_timeout": 300,
    }


def _author(state: State, entity: Message) -> Json:
    if entity.webhook_id is None:
        return user(state.users[entity.author_id])
    return {
        "id": str(entity.author_id),
        "username": entity.username or "webhook",
        "global_name": None,
        "discriminator": "0000",
        "avatar": None,
        "bot": True,
    }


def attachment_url(state: State, channel_id: int, entity: Attachment) -> str:
    """Where the fake serves the file: ``{base_url}/attachments/{channel}/{id}/{filename}``.

    Discord's CDN URL shape, on the fake's own server (see :mod:`fakediscord.rest.cdn`),
    so ``discord.Attachment.read()`` downloads the stored bytes without any internet.
    """
    filename = quote(entity.filename, safe="")
    base = state.cdn_base_url or state.base_url
    return f"{base}{ATTACHMENTS}/{channel_id}/{entity.id}/{filename}"


def attachment(state: State, channel_id: int, entity: Attachment) -> Json:
    """An attachment object; ``url`` and ``proxy_url`` both point at the fake."""
    url = attachment_url(state, channel_id, entity)
    return {
        "id": str(entity.id),
        "filename": entity.filename,
        "size": entity.size,
        "content_type": entity.content_type,
        "url": url,
        "proxy_url": url,
        "width": None,
        "height": None,
    }


def message(state: State, entity: Message, *, viewer_id: int | None = None) -> Json:
    """A message as ``viewer_id`` sees it (their own reactions come back with ``me``)."""
    payload: Json = {
        "id": str(entity.id),
        "channel_id": str(entity.channel_id),
        "author": _author(state, entity),
        "content": entity.content,
        "timestamp": timestamp(entity.timestamp),
        "edited_timestamp": timestamp(entity.edited_timestamp),
        "tts": entity.tts,
        "mention_everyone": entity.mention_everyone,
        "mentions": [user(state.users[i]) for i in entity.mention_ids if i in state.users],
        "mention_roles": [str(i) for i in entity.mention_role_ids],
        "attachments": [attachment(state, entity.channel_id, a) for a in entity.attachments],
        "embeds": entity.embeds,
        "components": entity.components,
        "reactions": [
            {
                "emoji": {"id": _sid(r.emoji_id), "name": r.emoji_name},
                "count": len(r.user_ids),
                "count_details": {"burst": 0, "normal": len(r.user_ids)},
                "me": viewer_id in r.user_ids,
                "me_burst": False,
                "burst_colors": [],
            }
            for r in entity.reactions
        ],
        "pinned": entity.pinned,
        "type": entity.type,
        "flags": entity.flags,
    }
    if entity.guild_id is not None:
        payload["guild_id"] = str(entity.guild_id)
    if entity.webhook_id is not None:
        payload["webhook_id"] = str(entity.webhook_id)
    if entity.application_id is not None:
        payload["application_id"] = str(entity.application_id)
    if entity.message_reference is not None:
        payload["message_reference"] = entity.message_reference
    if entity.nonce is not None:
        payload["nonce"] = entity.nonce
    if entity.thread_id is not None and entity.thread_id in state.channels:
        payload["thread"] = channel(state.channels[entity.thread_id])
    if entity.interaction_id is not None and entity.interaction_id in state.interactions:
        payload |= _interaction_metadata(state, entity.interaction_id)
    return payload


def _interaction_metadata(state: State, interaction_id: int) -> Json:
    interaction = state.interactions[interaction_id]
    invoker = user(state.users[interaction.user_id])
    metadata: Json = {
        "id": str(interaction.id),
        "type": interaction.type,
        "user": invoker,
        "authorizing_integration_owners": {"0": _sid(interaction.guild_id)},
    }
    if interaction.message_id is not None:
        metadata["interacted_message_id"] = str(interaction.message_id)
    legacy: Json = {"id": str(interaction.id), "type": interaction.type, "user": invoker}
    legacy["name"] = interaction.data.get("name", "")
    return {"interaction_metadata": metadata, "interaction": legacy}


def webhook(state: State, entity: Webhook, *, with_token: bool) -> Json:
    """A webhook; the token only goes to whoever may see it (the creating application)."""
    payload: Json = {
        "id": str(entity.id),
        "type": 1,
        "guild_id": str(entity.guild_id),
        "channel_id": str(entity.channel_id),
        "name": entity.name,
        "avatar": entity.avatar,
        "application_id": _sid(entity.application_id),
        "user": user(state.users[entity.creator_id]),
    }
    if with_token:
        payload["token"] = entity.token
    return payload


def application(state: State, entity: Application) -> Json:
    """``/oauth2/applications/@me``; AppInfo reads every key up to ``verify_key``."""
    owner = user(state.users[entity.owner_id])
    return {
        "id": str(entity.id),
        "name": entity.name,
        "description": "",
        "icon": None,
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": owner,
        "bot": owner,
        "team": None,
        "verify_key": "0" * 64,
        "summary": "",
        "flags": entity.flags,
        "rpc_origins": [],
        "tags": [],
        "redirect_uris": [],
        "interactions_endpoint_url": None,
        "approximate_guild_count": len(state.guilds),
    }


def application_command(entity: ApplicationCommand) -> Json:
    """A registered command: the uploaded definition plus the ids Discord assigns."""
    definition = entity.definition
    payload: Json = {
        "type": 1,
        "description": "",
        "options": [],
        "default_member_permissions": None,
        "dm_permission": True,
        "nsfw": False,
        **definition,
        "id": str(entity.id),
        "application_id": str(entity.application_id),
        "version": str(entity.version),
    }
    if entity.guild_id is not None:
        payload["guild_id"] = str(entity.guild_id)
    return payload
