"""Routes about who is who: gateway discovery, users, the application, its commands, guilds.

``discord.Client.login`` calls ``GET /users/@me`` then ``GET /oauth2/applications/@me``;
``CommandTree.sync`` calls ``PUT /applications/{app}/commands`` (or the guild variant).
An application's commands can only be managed with that application's bot token.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fakediscord import payloads
from fakediscord.errors import INVALID_FORM_BODY, MISSING_ACCESS, DiscordError
from fakediscord.rest._app import (
    API,
    API_KEY,
    body_of,
    bot_of,
    json_response,
    no_content,
    snowflake,
)

__all__ = ["routes"]

routes = web.RouteTableDef()
Json = dict[str, Any]


@routes.get(API + "/gateway")
async def get_gateway(request: web.Request) -> web.Response:
    return json_response({"url": request.app[API_KEY].gateway_url})


@routes.get(API + "/gateway/bot")
async def get_gateway_bot(request: web.Request) -> web.Response:
    limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
    api = request.app[API_KEY]
    return json_response(
        {"url": api.gateway_url, "shards": api.shards, "session_start_limit": limit}
    )


@routes.get(API + "/users/{user_id}")
async def get_user(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    if request.match_info["user_id"] == "@me":
        me = payloads.user(state.users[bot_of(request).user_id])
        return json_response(me | {"verified": True, "mfa_enabled": False, "email": None})
    return json_response(payloads.user(state.user(snowflake(request, "user_id"))))


@routes.get(API + "/oauth2/applications/@me")
@routes.get(API + "/applications/@me")
async def get_application(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    app = state.applications[bot_of(request).application_id]
    return json_response(payloads.application(state, app))


def _own_application(request: web.Request) -> int:
    application_id = snowflake(request, "application_id")
    if application_id != bot_of(request).application_id:
        raise DiscordError(403, MISSING_ACCESS)
    return application_id


def _guild_of(request: web.Request) -> int | None:
    if "guild_id" not in request.match_info:
        return None
    guild_id = snowflake(request, "guild_id")
    request.app[API_KEY].state.guild(guild_id)
    return guild_id


GLOBAL = API + "/applications/{application_id}/commands"
GUILD = API + "/applications/{application_id}/guilds/{guild_id}/commands"


@routes.get(GLOBAL)
@routes.get(GUILD)
async def list_commands(request: web.Request) -> web.Response:
    registry = request.app[API_KEY].commands
    commands = registry.registered(_own_application(request), _guild_of(request))
    return json_response([payloads.application_command(c) for c in commands])


@routes.put(GLOBAL)
@routes.put(GUILD)
async def overwrite_commands(request: web.Request) -> web.Response:
    definitions = body_of(request)
    if not isinstance(definitions, list):
        raise DiscordError(
            400, INVALID_FORM_BODY, "Invalid Form Body (expected a list of commands)"
        )
    registry = request.app[API_KEY].commands
    commands = registry.overwrite(_own_application(request), _guild_of(request), definitions)
    return json_response([payloads.application_command(c) for c in commands])


@routes.post(GLOBAL)
@routes.post(GUILD)
async def upsert_command(request: web.Request) -> web.Response:
    registry = request.app[API_KEY].commands
    command = registry.upsert(_own_application(request), _guild_of(request), body_of(request))
    return json_response(payloads.application_command(command), status=201)


@routes.get(GLOBAL + "/{command_id}")
@routes.get(GUILD + "/{command_id}")
async def get_command(request: web.Request) -> web.Response:
    registry = request.app[API_KEY].commands
    command = registry.get(
        _own_application(request), _guild_of(request), snowflake(request, "command_id")
    )
    return json_response(payloads.application_command(command))


@routes.delete(GLOBAL + "/{command_id}")
@routes.delete(GUILD + "/{command_id}")
async def delete_command(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    command = api.commands.get(
        _own_application(request), _guild_of(request), snowflake(request, "command_id")
    )
    del api.state.commands[command.id]
    api.state.changed.notify()
    return no_content()


@routes.get(API + "/guilds/{guild_id}")
async def get_guild(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    guild = state.guild(snowflake(request, "guild_id"))
    data = payloads.guild_create(state, guild)
    for key in ("members", "channels", "threads", "presences", "voice_states", "joined_at"):
        data.pop(key, None)
    data["approximate_member_count"] = len(guild.members)
    return json_response(data)


@routes.get(API + "/guilds/{guild_id}/channels")
async def get_guild_channels(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    guild = state.guild(snowflake(request, "guild_id"))
    return json_response([payloads.channel(c) for c in state.guild_channels(guild.id)])


@routes.get(API + "/guilds/{guild_id}/threads/active")
async def get_active_threads(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    guild = state.guild(snowflake(request, "guild_id"))
    threads = [payloads.channel(t) for t in state.active_threads(guild.id)]
    return json_response({"threads": threads, "members": []})


@routes.get(API + "/guilds/{guild_id}/members/{user_id}")
async def get_member(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    member = state.member(snowflake(request, "guild_id"), snowflake(request, "user_id"))
    return json_response(payloads.member(state, member))


@routes.get(API + "/guilds/{guild_id}/roles")
async def get_roles(request: web.Request) -> web.Response:
    state = request.app[API_KEY].state
    guild = state.guild(snowflake(request, "guild_id"))
    return json_response([payloads.role(r) for r in guild.roles.values()])
