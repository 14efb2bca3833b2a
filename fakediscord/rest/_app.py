"""The REST application: one middleware that records, rate-limits, injects faults,
authenticates and turns :class:`DiscordError` into Discord's JSON errors; helpers shared
by the routes.

Order inside the middleware matters and mirrors what a bot can observe: a request is
recorded first (so even a fault or a 404 for an unimplemented route shows up in
``fake.requests``), then held by a gate, then rate-limited (a 429, or the bucket's
headers on whatever answers it), then answered by a fault, and only then routed. The
final status of every answer is counted by the limiter (429s by scope, invalid requests).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

from fakediscord.commands import CommandRegistry
from fakediscord.errors import INVALID_FORM_BODY, UNAUTHORIZED, DiscordError
from fakediscord.faults import Faults
from fakediscord.gateway import Gateway
from fakediscord.interactions import Interactions
from fakediscord.models import BotAccount
from fakediscord.operations import Operations
from fakediscord.payloads import ATTACHMENTS
from fakediscord.ratelimits import Decision, RateLimiter
from fakediscord.recording import RecordedFile, RecordedRequest, Recorder
from fakediscord.state import State

__all__ = [
    "API",
    "API_KEY",
    "Api",
    "body_of",
    "bot_of",
    "files_of",
    "json_response",
    "maybe_bot_of",
    "middleware",
    "no_content",
    "snowflake",
    "truthy",
]

API = "/api/v10"
Json = dict[str, Any]


@dataclass(slots=True)
class Api:
    """Everything a route needs, stored once on the aiohttp application."""

    state: State
    ops: Operations
    gateway: Gateway
    commands: CommandRegistry
    interactions: Interactions
    recorder: Recorder
    faults: Faults
    limiter: RateLimiter
    gateway_url: str = ""
    """Set once the server listens (the port is only known then)."""
    shards: int = 1
    """What ``GET /gateway/bot`` recommends to sharded clients."""
    before_answer: Callable[[], None] | None = None
    """Called after a route ran and before its answer leaves (the playground saves the
    state there, so nothing answered is ever lost); None: nothing to do."""


API_KEY = web.AppKey("fakediscord.api", Api)
BODY_KEY = web.RequestKey("fakediscord.body", object)
FILES_KEY = web.RequestKey("fakediscord.files", list)
BOT_KEY = web.RequestKey("fakediscord.bot", object)


def json_response(data: Any, status: int = 200) -> web.Response:
    """JSON with a content type of exactly ``application/json``.

    aiohttp's ``json_response`` and ``Response(text=...)`` append ``; charset=utf-8``,
    and discord.py then treats the body as text (``http.json_or_text`` compares the
    header for equality). Passing ``body=`` bytes keeps the header bare.
    """
    return web.Response(
        status=status, body=json.dumps(data).encode(), content_type="application/json"
    )


def no_content() -> web.Response:
    return web.Response(status=204)


def bot_of(request: web.Request) -> BotAccount:
    """The bot that authenticated this request (routes needing auth only)."""
    account = request[BOT_KEY]
    if not isinstance(account, BotAccount):
        raise DiscordError(401, UNAUTHORIZED, "401: Unauthorized")
    return account


def maybe_bot_of(request: web.Request) -> BotAccount | None:
    """The bot behind the Authorization header, if any (webhook-token routes)."""
    account = request.get(BOT_KEY)
    return account if isinstance(account, BotAccount) else None


def body_of(request: web.Request) -> Any:
    return request[BODY_KEY]


def files_of(request: web.Request) -> list[RecordedFile]:
    files: list[RecordedFile] = request[FILES_KEY]
    return files


def snowflake(request: web.Request, name: str) -> int:
    value = request.match_info[name]
    if not value.isdigit():
        raise DiscordError(
            400, INVALID_FORM_BODY, f"Invalid Form Body ({name}: Value {value!r} is not snowflake.)"
        )
    return int(value)


def truthy(value: str | None) -> bool:
    """Query flags as discord.py sends them (``1``/``0``) or as documented (``true``)."""
    return (value or "").lower() in ("1", "true", "yes")


def _needs_auth(path: str) -> bool:
    """Webhook-token and interaction routes authenticate by their token, as on Discord."""
    parts = path.strip("/").split("/")
    if parts[0] == "interactions" or path in ("/gateway",):
        return False
    return not (parts[0] == "webhooks" and len(parts) >= 3)


async def _read_body(request: web.Request) -> tuple[Any, list[RecordedFile]]:
    if request.content_type.startswith("multipart/"):
        payload: Any = None
        files: list[RecordedFile] = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                continue  # nested multipart: Discord does not use it
            data = bytes(await part.read())  # aiohttp gives a bytearray: not saveable as is
            if part.name == "payload_json":
                payload = json.loads(data)
            else:
                content_type = part.headers.get("Content-Type")
                files.append(RecordedFile(part.name or "", part.filename or "", content_type, data))
        return payload, files
    raw = await request.read()
    return (json.loads(raw) if raw.strip() else None), []


@web.middleware
async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.path.startswith(ATTACHMENTS + "/"):
        return await _cdn(request.app[API_KEY], request, handler)
    if not request.path.startswith(API + "/"):
        response: web.StreamResponse = await handler(request)
        return response
    api = request.app[API_KEY]
    try:
        body, files = await _read_body(request)
    except (ValueError, UnicodeDecodeError):
        body, files = None, []
    request[BODY_KEY], request[FILES_KEY] = body, files
    path = request.path[len(API) :]
    record = api.recorder.add(
        RecordedRequest(
            method=request.method,
            path=path,
            query=dict(request.query),
            json=body,
            authorization=request.headers.get("Authorization"),
            at=api.state.now(),
            files=files,
        )
    )
    answer = await _answer(api, request, handler, record)
    if api.before_answer is not None:
        api.before_answer()
    api.recorder.answered(record, answer.status)
    scope = answer.headers.get("X-RateLimit-Scope")
    api.limiter.count(answer.status, scope, ban=record.rate_limited == BANNED)
    return answer


async def _cdn(api: Api, request: web.Request, handler: Any) -> web.StreamResponse:
    """A file download: not recorded and unauthenticated, but gates and faults apply
    (``fail_next("GET", "/attachments/*", 503)``), as a CDN can be slow or fail."""
    gate = api.faults.gate(request.method, request.path)
    if gate is not None:
        await gate.pass_through()
    fault = api.faults.take(request.method, request.path)
    if fault is not None:
        return fault.response()
    response: web.StreamResponse = await handler(request)
    return response


async def _answer(
    api: Api, request: web.Request, handler: Any, record: RecordedRequest
) -> web.StreamResponse:
    method, path = request.method, record.path
    gate = api.faults.gate(method, path)
    if gate is not None:
        await gate.pass_through()
    decision = api.limiter.check(record.token, method, path)
    if not decision.allowed:
        record.rate_limited = decision.scope or BANNED
        return _refusal(decision)
    answer = await _routed(api, request, handler, record)
    if "X-RateLimit-Limit" not in answer.headers:  # an injected 429 keeps its own
        answer.headers.update(decision.headers)
    return answer


BANNED = "cloudflare"
"""``RecordedRequest.rate_limited`` of a request refused by the invalid-request ban."""


def _refusal(decision: Decision) -> web.Response:
    """The limiter's 429: Discord's JSON body, or Cloudflare's plain-text ban page."""
    if isinstance(decision.body, str):
        return web.Response(
            status=decision.status,
            text=decision.body,
            content_type="text/plain",
            headers=decision.headers,
        )
    return web.Response(
        status=decision.status,
        body=json.dumps(decision.body).encode(),
        content_type="application/json",
        headers=decision.headers,
    )


async def _routed(
    api: Api, request: web.Request, handler: Any, record: RecordedRequest
) -> web.StreamResponse:
    method, path = request.method, record.path
    try:
        fault = api.faults.take(method, path)
        if fault is not None:
            record.fault = True
            return fault.response()
        if request.match_info.http_exception is not None:
            record.implemented = False
            message = f"fakediscord does not implement {method} {request.path}"
            return json_response({"message": message, "code": 0}, status=404)
        token = record.token
        account = api.state.bot_by_token(token) if token else None
        if account is None and _needs_auth(path):
            raise DiscordError(401, UNAUTHORIZED, "401: Unauthorized")
        request[BOT_KEY] = account
        response: web.StreamResponse = await handler(request)
        return response
    except DiscordError as exc:
        return json_response(exc.body(), status=exc.status)
