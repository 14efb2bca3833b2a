"""Webhook routes: managing webhooks (bot token) and using them (webhook token).

``/webhooks/{id}/{token}`` is shared by real webhooks and interaction followups (the id
is then the application id and the token the interaction's), as on Discord.

Rules kept because the adapter depends on them: a webhook lives on a parent channel and
reaches a thread only through ``thread_id``; a send into an archived thread reopens it
unless locked (50083); a webhook message is found only in the channel it was sent to,
so an edit without the right ``thread_id`` is an unknown message (10008); tokens are
returned only to the application that created the webhook.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fakediscord import payloads
from fakediscord.errors import UNKNOWN_CHANNEL, UNKNOWN_MESSAGE, DiscordError
from fakediscord.gateway import Intents
from fakediscord.models import Channel, Interaction, Message, Webhook
from fakediscord.rest._app import (
    API,
    API_KEY,
    Api,
    body_of,
    bot_of,
    files_of,
    json_response,
    maybe_bot_of,
    no_content,
    snowflake,
    truthy,
)
from fakediscord.rest.channels import attachments_from

__all__ = ["routes"]

routes = web.RouteTableDef()
Json = dict[str, Any]
WEBHOOK = API + "/webhooks/{webhook_id}"
TOKEN = WEBHOOK + "/{webhook_token}"


def _visible(api: Api, request: web.Request, webhook: Webhook) -> Json:
    account = maybe_bot_of(request)
    mine = account is not None and account.application_id == webhook.application_id
    return payloads.webhook(api.state, webhook, with_token=mine)


@routes.post(API + "/channels/{channel_id}/webhooks")
async def create_webhook(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    channel = api.state.channel(snowflake(request, "channel_id"))
    body: Json = body_of(request) or {}
    webhook = api.ops.create_webhook(
        channel, bot_of(request).user_id, str(body.get("name") or "webhook")
    )
    return json_response(payloads.webhook(api.state, webhook, with_token=True))


@routes.get(API + "/channels/{channel_id}/webhooks")
async def channel_webhooks(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    channel = api.state.channel(snowflake(request, "channel_id"))
    found = [w for w in api.state.webhooks.values() if w.channel_id == channel.id]
    return json_response([_visible(api, request, w) for w in found])


@routes.get(API + "/guilds/{guild_id}/webhooks")
async def guild_webhooks(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    guild = api.state.guild(snowflake(request, "guild_id"))
    found = [w for w in api.state.webhooks.values() if w.guild_id == guild.id]
    return json_response([_visible(api, request, w) for w in found])


@routes.get(WEBHOOK)
async def get_webhook(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    return json_response(
        _visible(api, request, api.state.webhook(snowflake(request, "webhook_id")))
    )


@routes.patch(WEBHOOK)
@routes.patch(TOKEN)
async def edit_webhook(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    webhook = api.state.webhook(
        snowflake(request, "webhook_id"), request.match_info.get("webhook_token")
    )
    body: Json = body_of(request) or {}
    if body.get("name"):
        webhook.name = str(body["name"])
    if body.get("channel_id") and "webhook_token" not in request.match_info:
        channel = api.state.channel(int(body["channel_id"]))
        webhook.channel_id = channel.id
    api.ops.gateway.dispatch(
        "WEBHOOKS_UPDATE",
        lambda _: {"guild_id": str(webhook.guild_id), "channel_id": str(webhook.channel_id)},
        guild_id=webhook.guild_id,
        intent=Intents.GUILD_WEBHOOKS,
    )
    return json_response(_visible(api, request, webhook))


@routes.delete(WEBHOOK)
@routes.delete(TOKEN)
async def delete_webhook(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    webhook = api.state.webhook(
        snowflake(request, "webhook_id"), request.match_info.get("webhook_token")
    )
    api.ops.delete_webhook(webhook)
    return no_content()


@routes.get(TOKEN)
async def get_webhook_with_token(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    webhook = api.state.webhook(
        snowflake(request, "webhook_id"), request.match_info["webhook_token"]
    )
    data = payloads.webhook(api.state, webhook, with_token=True)
    data.pop("user", None)
    return json_response(data)


def _followup_target(api: Api, request: web.Request) -> Interaction | None:
    return api.interactions.by_webhook(
        snowflake(request, "webhook_id"), request.match_info["webhook_token"]
    )


@routes.post(TOKEN)
async def execute_webhook(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    body: Json = body_of(request) or {}
    attachments = attachments_from(api.state, files_of(request))
    interaction = _followup_target(api, request)
    if interaction is not None:
        message = api.interactions.followup(interaction, body, attachments)
        return json_response(payloads.message(api.state, message))
    webhook = api.state.webhook(
        snowflake(request, "webhook_id"), request.match_info["webhook_token"]
    )
    channel = _target_channel(api, request, webhook)
    message = api.ops.post_message(
        channel.id, webhook.id, body, webhook=webhook, attachments=attachments
    )
    if not truthy(request.query.get("wait")):
        return no_content()
    return json_response(payloads.message(api.state, message))


def _target_channel(api: Api, request: web.Request, webhook: Webhook) -> Channel:
    """The webhook's channel, or the thread named by ``thread_id`` (which must be its child)."""
    raw = request.query.get("thread_id")
    if not raw:
        return api.state.channel(webhook.channel_id)
    thread = api.state.channel(int(raw)) if raw.isdigit() else None
    if thread is None or thread.parent_id != webhook.channel_id:
        raise DiscordError(404, UNKNOWN_CHANNEL)
    return thread


MESSAGE = TOKEN + "/messages/{message_id}"


def _webhook_message(api: Api, request: web.Request) -> tuple[Message, Interaction | None]:
    interaction = _followup_target(api, request)
    raw = request.match_info["message_id"]
    if interaction is not None:
        if raw == "@original":
            return api.interactions.original(interaction), interaction
        return api.interactions.followup_message(
            interaction, snowflake(request, "message_id")
        ), interaction
    webhook = api.state.webhook(
        snowflake(request, "webhook_id"), request.match_info["webhook_token"]
    )
    channel = _target_channel(api, request, webhook)
    message = api.state.messages.get(int(raw)) if raw.isdigit() else None
    if message is None or message.webhook_id != webhook.id or message.channel_id != channel.id:
        raise DiscordError(404, UNKNOWN_MESSAGE)
    return message, None


@routes.get(MESSAGE)
async def get_webhook_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    message, _ = _webhook_message(api, request)
    return json_response(payloads.message(api.state, message))


@routes.patch(MESSAGE)
async def edit_webhook_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    message, interaction = _webhook_message(api, request)
    body: Json = body_of(request) or {}
    if interaction is None:
        api.ops.edit_message(message, body)
    elif request.match_info["message_id"] == "@original":
        api.interactions.edit_original(interaction, body)
    else:
        api.interactions.edit_followup(interaction, message.id, body)
    return json_response(payloads.message(api.state, message))


@routes.delete(MESSAGE)
async def delete_webhook_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    message, interaction = _webhook_message(api, request)
    if interaction is not None and request.match_info["message_id"] == "@original":
        api.interactions.delete_original(interaction)
    else:
        api.ops.delete_message(message)
    return no_content()


@routes.post(API + "/interactions/{interaction_id}/{interaction_token}/callback")
async def interaction_callback(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    interaction = api.interactions.by_callback(
        snowflake(request, "interaction_id"), request.match_info["interaction_token"]
    )
    body: Json = body_of(request) or {}
    attachments = attachments_from(api.state, files_of(request))
    message = api.interactions.callback(interaction, body, attachments)
    if not truthy(request.query.get("with_response")):
        return no_content()
    kind = int(body.get("type", 0))
    answer: Json = {
        "interaction": {
            "id": str(interaction.id),
            "type": interaction.type,
            "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(message and message.ephemeral),
        }
    }
    if message is not None:
        answer["interaction"]["response_message_id"] = str(message.id)
        answer["resource"] = {"type": kind, "message": payloads.message(api.state, message)}
    return json_response(answer)
