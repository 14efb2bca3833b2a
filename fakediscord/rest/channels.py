"""Channel routes: channels and threads, their messages, pins, reactions, typing, thread members.

Bot sends obey the same thread rules as webhook sends (archived → reopened unless
locked, 50083), and a bot may edit only its own messages (50005), as on Discord.
"""

from __future__ import annotations

import mimetypes
from datetime import datetime
from typing import Any

from aiohttp import web

from fakediscord import payloads
from fakediscord.errors import CANNOT_EDIT_OTHERS_MESSAGE, DiscordError
from fakediscord.models import Attachment, Channel, Message
from fakediscord.recording import RecordedFile
from fakediscord.rest._app import (
    API,
    API_KEY,
    body_of,
    bot_of,
    files_of,
    json_response,
    no_content,
    snowflake,
)
from fakediscord.state import State

__all__ = ["attachments_from", "routes"]

routes = web.RouteTableDef()
Json = dict[str, Any]
CHANNEL = API + "/channels/{channel_id}"
MESSAGE = CHANNEL + "/messages/{message_id}"
GENERIC_TYPE = "application/octet-stream"


def _channel(request: web.Request) -> Channel:
    return request.app[API_KEY].state.channel(snowflake(request, "channel_id"))


def _message(request: web.Request) -> Message:
    state = request.app[API_KEY].state
    return state.message(snowflake(request, "channel_id"), snowflake(request, "message_id"))


def attachments_from(state: State, files: list[RecordedFile]) -> list[Attachment]:
    """Attachments for the ``files[n]`` parts of a multipart message request.

    discord.py labels every part ``application/octet-stream``; Discord types a file
    by its name instead, so an ``.html`` export opens as a page in a browser.
    """
    return [
        Attachment(
            id=state.new_id(),
            filename=f.filename,
            size=len(f.data),
            content_type=_typed(f.filename, f.content_type),
            data=f.data,
        )
        for f in files
    ]


def _typed(filename: str, declared: str | None) -> str | None:
    if declared not in (None, GENERIC_TYPE):
        return declared
    return mimetypes.guess_type(filename, strict=False)[0] or declared


@routes.get(CHANNEL)
async def get_channel(request: web.Request) -> web.Response:
    return json_response(payloads.channel(_channel(request)))


@routes.patch(CHANNEL)
async def edit_channel(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    channel = api.ops.update_channel(_channel(request), body_of(request) or {})
    return json_response(payloads.channel(channel))


@routes.delete(CHANNEL)
async def delete_channel(request: web.Request) -> web.Response:
    channel = _channel(request)
    request.app[API_KEY].ops.delete_channel(channel)
    return json_response(payloads.channel(channel))


@routes.get(CHANNEL + "/messages")
async def list_messages(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    channel = _channel(request)
    limit = max(1, min(int(request.query.get("limit", 50)), 100))
    messages = state.messages_in(channel.id)
    if "before" in request.query:
        messages = [m for m in messages if m.id < int(request.query["before"])]
    if "after" in request.query:
        messages = [m for m in messages if m.id > int(request.query["after"])][:limit]
    if "around" in request.query:
        around = int(request.query["around"])
        older = [m for m in messages if m.id <= around][-(limit // 2 + 1) :]
        messages = older + [m for m in messages if m.id > around][: limit - len(older)]
    viewer = bot_of(request).user_id
    newest_first = list(reversed(messages))[:limit]
    return json_response([payloads.message(state, m, viewer_id=viewer) for m in newest_first])


@routes.post(CHANNEL + "/messages")
async def create_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    channel = _channel(request)
    attachments = attachments_from(api.state, files_of(request))
    author = bot_of(request).user_id
    message = api.ops.post_message(
        channel.id, author, body_of(request) or {}, attachments=attachments
    )
    return json_response(payloads.message(api.state, message, viewer_id=author))


# Pins: the current routes (``/messages/pins``) and the deprecated ones (``/pins``) that
# older clients use. Registered before the message routes, which ``pins`` would match.
PINS = CHANNEL + "/messages/pins"
OLD_PINS = CHANNEL + "/pins"


@routes.get(PINS)
async def list_pins(request: web.Request) -> web.Response:
    """``{"items": [{"pinned_at", "message"}], "has_more"}``, the newest pin first."""
    api = request.app[API_KEY]
    channel = _channel(request)
    limit = max(1, min(int(request.query.get("limit", 50)), 50))
    viewer = bot_of(request).user_id
    pinned = api.ops.pins(channel.id)
    if "before" in request.query:
        before = datetime.fromisoformat(request.query["before"])
        pinned = [m for m in pinned if m.pinned_at is not None and m.pinned_at < before]
    items = [
        {
            "pinned_at": payloads.timestamp(m.pinned_at),
            "message": payloads.message(api.state, m, viewer_id=viewer),
        }
        for m in pinned[:limit]
    ]
    return json_response({"items": items, "has_more": len(pinned) > limit})


@routes.get(OLD_PINS)
async def list_pins_deprecated(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    viewer = bot_of(request).user_id
    pinned = api.ops.pins(_channel(request).id)
    return json_response([payloads.message(api.state, m, viewer_id=viewer) for m in pinned])


@routes.put(PINS + "/{message_id}")
@routes.put(OLD_PINS + "/{message_id}")
@routes.delete(PINS + "/{message_id}")
@routes.delete(OLD_PINS + "/{message_id}")
async def pin(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    api.ops.pin(_message(request), bot_of(request).user_id, pinned=request.method == "PUT")
    return no_content()


@routes.get(MESSAGE)
async def get_message(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    return json_response(
        payloads.message(state, _message(request), viewer_id=bot_of(request).user_id)
    )


@routes.patch(MESSAGE)
async def edit_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    message = _message(request)
    viewer = bot_of(request).user_id
    if message.author_id != viewer or message.webhook_id is not None:
        raise DiscordError(403, CANNOT_EDIT_OTHERS_MESSAGE)
    api.ops.edit_message(message, body_of(request) or {})
    return json_response(payloads.message(api.state, message, viewer_id=viewer))


@routes.delete(MESSAGE)
async def delete_message(request: web.Request) -> web.Response:
    request.app[API_KEY].ops.delete_message(_message(request))
    return no_content()


@routes.post(CHANNEL + "/threads")
async def start_thread(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    body: Json = body_of(request) or {}
    owner = bot_of(request).user_id
    thread = api.ops.create_thread(
        _channel(request),
        str(body.get("name") or "thread"),
        owner,
        type=int(body.get("type") or 12),
        auto_archive_duration=body.get("auto_archive_duration"),
    )
    return json_response(_thread_with_member(api.state, thread, owner), status=201)


@routes.post(MESSAGE + "/threads")
async def start_thread_from_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    body: Json = body_of(request) or {}
    starter = _message(request)
    owner = bot_of(request).user_id
    thread = api.ops.create_thread(
        _channel(request),
        str(body.get("name") or "thread"),
        owner,
        auto_archive_duration=body.get("auto_archive_duration"),
        starter=starter,
    )
    return json_response(_thread_with_member(api.state, thread, owner), status=201)


def _thread_with_member(state: State, thread: Channel, owner: int) -> Json:
    return payloads.channel(thread) | {"member": payloads.thread_member(thread, owner, state.now())}


@routes.get(CHANNEL + "/threads/archived/public")
async def archived_threads(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    parent = _channel(request)
    threads = [
        payloads.channel(c)
        for c in state.channels.values()
        if c.parent_id == parent.id and c.archived and c.type == 11
    ]
    return json_response({"threads": threads, "members": [], "has_more": False})


@routes.put(CHANNEL + "/thread-members/{user_id}")
async def join_thread(request: web.Request) -> web.Response:
    thread = _channel(request)
    raw = request.match_info["user_id"]
    user_id = bot_of(request).user_id if raw == "@me" else snowflake(request, "user_id")
    if user_id not in thread.member_ids:
        thread.member_ids.append(user_id)
        request.app[API_KEY].state.changed.notify()
    return no_content()


@routes.post(CHANNEL + "/typing")
async def typing(request: web.Request) -> web.Response:
    _channel(request)
    return no_content()


REACTION = MESSAGE + "/reactions/{emoji}/{user_id}"


@routes.put(REACTION)
@routes.delete(REACTION)
async def react(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    raw = request.match_info["user_id"]
    user_id = bot_of(request).user_id if raw == "@me" else snowflake(request, "user_id")
    emoji = request.match_info["emoji"]
    api.ops.react(_message(request), user_id, emoji, add=request.method == "PUT")
    return no_content()


@routes.get(MESSAGE + "/reactions/{emoji}")
async def reaction_users(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    emoji = request.match_info["emoji"]
    reaction = next((r for r in _message(request).reactions if r.key == emoji), None)
    users = [payloads.user(state.users[i]) for i in (reaction.user_ids if reaction else [])]
    return json_response(users)
