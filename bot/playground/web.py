"""The playground's web page and its small JSON API, served on 127.0.0.1.

The page is a minimal Discord-like client written for this project; every file
it needs is in ``static/`` (no CDN), so the playground works offline. It acts
on the fake Discord the way Discord's own client would: a message is a user
message, a ``/command`` line becomes an APPLICATION_COMMAND interaction (parsed
by :mod:`core.command_text` against the commands the bot registered),
a button click becomes a component interaction. The bot cannot tell the
difference from Discord, which is the point.

Live updates go out as server-sent events: after any change to the fake's state
the stream says which channels changed (by a cheap per-channel fingerprint) and
whether the channel list did; the page refetches just those. Snowflakes travel
as strings, as on Discord's wire, because JavaScript numbers cannot hold them.

Routes: ``GET /`` the page; ``GET /api/state``; ``GET /api/channels/{id}/messages``;
``POST /api/messages`` ``{channel_id, user_id, content}`` as JSON, or as a multipart
form with ``files`` parts (an upload); ``POST /api/command``
``{channel_id, user_id, text}``; ``POST /api/autocomplete`` ``{channel_id, user_id,
text}`` (the bot's choices for the option being typed at the end of ``text``);
``POST /api/click`` ``{message_id, custom_id, user_id[, values]}``; ``POST /api/bot``
``{action: "stop" | "kill" | "start"}`` (the bot's controls; answered once a stop or a
kill has ended the bot, or once a start has launched it); ``GET /api/events`` (SSE);
``GET /favicon.ico``.

Every request that changes something is saved before it is answered (the fake's
journal, :meth:`FakeDiscord.commit`): what the page was told was sent is on disk.
While the bot is offline, messages are accepted (they wait in the channel, as on
Discord, and the bot reads them back when it starts); commands and button presses
are refused with a line saying so, as Discord's client says an application did
not respond.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from aiohttp import BodyPartReader, web

from bot.playground.supervisor import BotControl, BotControlError
from bot.playground.view import PageView, World
from core.command_text import (
    CHANNEL,
    ROLE,
    CommandTextError,
    parse_command,
    parse_typing,
)
from fakediscord import MAX_CONTENT, MAX_FILE_BYTES, MAX_FILES, FakeDiscord, UserFile
from fakediscord.errors import DiscordError

__all__ = ["STATIC_DIR", "PlaygroundWeb", "offline_refusal"]

STATIC_DIR = Path(__file__).with_name("static")
KEEPALIVE_SECONDS = 15.0
COALESCE_SECONDS = 0.05
"""After a change, wait this long so a burst of changes becomes one event."""
AUTOCOMPLETE_SECONDS = 3.0
"""Discord gives a bot 3 s to answer an autocomplete; later, the client shows nothing."""
UPLOAD_HEADER = "X-Playground-Upload"
"""Sent with every multipart upload: a header a cross-site form cannot add."""
READ_CHUNK = 64 * 1024
FIELD_MAX_BYTES = 64 * 1024
"""A text field (ids, the message) is far smaller; more is not a message."""


def offline_refusal(bot_name: str) -> str:
    """What a command or a button press gets while the bot is down."""
    return (
        f"{bot_name} is offline: commands and buttons need it running. Messages you write "
        "are kept, and read back when it starts (Start, under its name in Members)."
    )


Json = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_log = structlog.get_logger("bot.playground")


_TYPED_MENTION = re.compile(r"(?<![\w<@])@([A-Za-z0-9_](?:[A-Za-z0-9_.]{0,30}[A-Za-z0-9_])?)")
"""``@name``: a dot may be inside a name, never end it (``hey @threadbound.`` ends a
sentence)."""


def typed_mentions(content: str, names: dict[str, int]) -> str:
    """``@alice`` typed in the box becomes ``<@id>``, as Discord's own client sends it: a
    mention the bot can see (``@threadbound hello`` starts a session). Names nobody has,
    ``@everyone`` and ``@here`` stay as typed."""

    def mention(match: re.Match[str]) -> str:
        user_id = names.get(match.group(1).lower())
        return match.group(0) if user_id is None else f"<@{user_id}>"

    return _TYPED_MENTION.sub(mention, content)


class BadRequest(Exception):
    """A request the page should not have sent; answered 400 with the message."""


def _int(body: Json, key: str) -> int:
    try:
        return int(body[key])
    except (KeyError, TypeError, ValueError):
        raise BadRequest(f"{key} is required (a snowflake as a string)") from None


class PlaygroundWeb:
    """The aiohttp application over one :class:`FakeDiscord`."""

    def __init__(
        self,
        fake: FakeDiscord,
        world: World,
        *,
        host: str,
        port: int,
        bot: BotControl | None = None,
    ) -> None:
        self.fake = fake
        self.world = world
        self.bot = bot
        self.view = PageView(fake, world, bot=bot)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._allowed_hosts: frozenset[str] = frozenset()
        self.url = ""

    # lifecycle

    def application(self) -> web.Application:
        # aiohttp's 1 MiB body limit stays for JSON; an upload is streamed by _upload,
        # which applies Discord's own limits part by part.
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/favicon.ico", self._favicon)  # asked for by browsers and tools
        app.router.add_static("/static/", STATIC_DIR, append_version=False)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/api/channels/{channel_id}/messages", self._messages)
        app.router.add_post("/api/messages", self._send)
        app.router.add_post("/api/command", self._command)
        app.router.add_post("/api/autocomplete", self._autocomplete)
        app.router.add_post("/api/click", self._click)
        app.router.add_post("/api/bot", self._control)
        app.router.add_get("/api/events", self._events)
        return app

    async def start(self) -> str:
        """Listen; returns the page's URL (the real port when 0 was asked)."""
        self._runner = web.AppRunner(self.application(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        host, port = self._runner.addresses[0][:2]
        self._allowed_hosts = frozenset({f"{host}:{port}", f"localhost:{port}"})
        self.url = f"http://{host}:{port}/"
        return self.url

    async def stop(self) -> None:
        """End the event streams, then the server; safe to call twice."""
        self._closing.set()
        self.fake.state.changed.notify()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # plumbing

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Refuse requests from elsewhere; answer a bad request with a JSON error; save
        what a request changed before it is answered."""
        refused = self._refuse_foreign(request)
        if refused is not None:
            return web.json_response({"error": refused}, status=403)
        try:
            return await handler(request)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except DiscordError as exc:
            return web.json_response({"error": exc.message}, status=exc.status)
        finally:
            if request.method not in ("GET", "HEAD", "OPTIONS"):
                self._save()

    def _save(self) -> None:
        try:
            self.fake.commit()
        except OSError as exc:
            journal = self.fake.journal
            path = str(journal.path) if journal is not None else ""
            _log.warning("playground.save_failed", path=path, error=str(exc))

    def _online(self) -> bool:
        return self.fake.presence(self.world.bot_user_id) == "online"

    def _offline(self) -> web.Response:
        name = self.fake.state.users[self.world.bot_user_id].username
        return web.json_response({"error": offline_refusal(name)}, status=503)

    def _refuse_foreign(self, request: web.Request) -> str | None:
        """Why a request from outside the playground's own page is refused, or None.

        The page has no login, so other web sites must not drive it through the
        visitor's browser: the Host must be the loopback address we listen on (no DNS
        rebinding), a state-changing request must be JSON (a cross-site form or
        ``text/plain`` post is not, and a JSON one needs a CORS preflight nobody
        answers) or a multipart upload carrying :data:`UPLOAD_HEADER` (which a form
        cannot send, and a script elsewhere only after a preflight), and an Origin,
        when sent, must be this page's.
        """
        if request.host not in self._allowed_hosts:
            return "the playground only answers requests addressed to 127.0.0.1"
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return None
        upload = request.content_type == "multipart/form-data" and UPLOAD_HEADER in request.headers
        if request.content_type != "application/json" and not upload:
            return "send JSON (Content-Type: application/json)"
        origin = request.headers.get("Origin")
        if origin is not None and origin not in {f"http://{h}" for h in self._allowed_hosts}:
            return "requests from other sites are refused"
        return None

    @staticmethod
    async def _body(request: web.Request) -> Json:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def _member(self, user_id: int) -> int:
        if user_id not in self.world.member_ids:
            raise BadRequest("user_id is not one of the playground's users")
        return user_id

    def _channel(self, channel_id: int) -> int:
        channel = self.fake.state.channels.get(channel_id)
        if channel is None or channel.guild_id != self.world.guild_id:
            raise BadRequest("no such channel in the playground guild")
        return channel_id

    # pages

    async def _index(self, _request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    async def _favicon(self, _request: web.Request) -> web.FileResponse:
        """The page's icon (also linked from index.html), so no load of it ends in a 404."""
        return web.FileResponse(
            STATIC_DIR / "favicon.svg", headers={"Content-Type": "image/svg+xml"}
        )

    async def _state(self, _request: web.Request) -> web.Response:
        return web.json_response(self.view.snapshot())

    async def _messages(self, request: web.Request) -> web.Response:
        try:
            channel_id = int(request.match_info["channel_id"])
            viewer = int(request.query.get("viewer", "0"))
        except ValueError:
            raise BadRequest("channel id and viewer are snowflakes") from None
        self._channel(channel_id)
        state = self.fake.state
        messages = [
            self.view.render(m, viewer)
            for m in state.messages_in(channel_id, include_ephemeral=True)
            if not m.ephemeral or self.view.invoker(m) == viewer
        ]
        return web.json_response({"channel_id": str(channel_id), "messages": messages})

    # actions

    async def _send(self, request: web.Request) -> web.Response:
        files: list[UserFile] = []
        if request.content_type == "multipart/form-data":
            body, files = await _upload(request)
        else:
            body = await self._body(request)
        channel_id = self._channel(_int(body, "channel_id"))
        user_id = self._member(_int(body, "user_id"))
        content = str(body.get("content") or "")
        if not content.strip() and not files:
            raise BadRequest("an empty message is not sent")
        if len(content) > MAX_CONTENT:
            raise BadRequest(
                f"a message may be {MAX_CONTENT} characters at most (this one is {len(content)})"
            )
        content = typed_mentions(content, self._names())
        message = await self.fake.user_says(channel_id, user_id, content, files=files)
        return web.json_response({"id": str(message.id)})

    def _names(self) -> dict[str, int]:
        """Who can be mentioned by name: the guild's members and the bot, lower-cased."""
        users = self.fake.state.users
        ids = (self.world.bot_user_id, *self.world.member_ids)
        return {users[i].username.lower(): i for i in ids if i in users}

    async def _command(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        channel_id = self._channel(_int(body, "channel_id"))
        user_id = self._member(_int(body, "user_id"))
        text = str(body.get("text") or "")
        try:
            parsed = parse_command(text, self.view.definitions(), resolve=self._resolve)
        except CommandTextError as exc:
            raise BadRequest(str(exc)) from None
        if not self._online():
            return self._offline()
        try:
            handle = await self.fake.invoke_command(
                self.world.guild_id,
                channel_id,
                user_id,
                parsed.command,
                parsed.options,
                bot=self.world.bot_user_id,
            )
        except (ValueError, LookupError) as exc:
            raise BadRequest(str(exc)) from None
        except RuntimeError:
            return web.json_response({"error": "the bot is not connected yet"}, status=503)
        return web.json_response(
            {
                "interaction_id": str(handle.id),
                "command": parsed.command,
                "options": {k: _jsonable(v) for k, v in parsed.options.items()},
            }
        )

    async def _autocomplete(self, request: web.Request) -> web.Response:
        """The bot's choices for the option being typed at the end of ``text``, as Discord's
        client asks for them (an autocomplete interaction); none when it offers none."""
        body = await self._body(request)
        channel_id = self._channel(_int(body, "channel_id"))
        user_id = self._member(_int(body, "user_id"))
        typing = parse_typing(str(body.get("text") or ""), self.view.definitions())
        if typing is None or not self._online():
            return web.json_response({"choices": []})
        try:
            handle = await self.fake.autocomplete(
                self.world.guild_id,
                channel_id,
                user_id,
                typing.command,
                typing.typed,
                focused=typing.focused,
                bot=self.world.bot_user_id,
            )
            async with asyncio.timeout(AUTOCOMPLETE_SECONDS):
                answer = await handle.wait_response()
        except (ValueError, LookupError, RuntimeError, TimeoutError):
            return web.json_response({"choices": []})  # no choices is what Discord shows
        choices = (answer.body.get("data") or {}).get("choices") or []
        return web.json_response(
            {
                "option": typing.focused,
                "choices": [{"name": str(c["name"]), "value": str(c["value"])} for c in choices],
            }
        )

    def _resolve(self, kind: int, name: str) -> int | None:
        """A user, channel or role of the playground guild by its name."""
        state = self.fake.state
        guild = state.guild(self.world.guild_id)
        lowered = name.lower()
        if kind == CHANNEL:
            found = [
                c.id
                for c in state.channels.values()
                if c.guild_id == guild.id and c.name.lower() == lowered
            ]
        elif kind == ROLE:
            found = [r.id for r in guild.roles.values() if r.name.lower().lstrip("@") == lowered]
        else:
            found = [uid for uid in guild.members if state.users[uid].username.lower() == lowered]
        return found[0] if found else None

    async def _click(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        message_id = _int(body, "message_id")
        user_id = self._member(_int(body, "user_id"))
        custom_id = str(body.get("custom_id") or "")
        message = self.fake.state.messages.get(message_id)
        if message is None or message.guild_id != self.world.guild_id:
            raise BadRequest("no such message")
        values = body.get("values")
        if not self._online():
            return self._offline()
        try:
            if isinstance(values, list):
                picked = [str(v) for v in values]
                handle = await self.fake.select(message_id, custom_id, user_id, picked)
            else:
                handle = await self.fake.click_button(message_id, custom_id, user_id)
        except LookupError as exc:
            raise BadRequest(str(exc)) from None
        except RuntimeError:
            return web.json_response({"error": "the bot is not connected yet"}, status=503)
        return web.json_response({"interaction_id": str(handle.id)})

    async def _control(self, request: web.Request) -> web.Response:
        """The bot's Stop (clean, as Ctrl-C), Kill (SIGKILL) and Start."""
        body = await self._body(request)
        action = str(body.get("action") or "")
        if self.bot is None:
            raise BadRequest("this playground has no bot to control")
        actions = {"stop": self.bot.stop, "kill": self.bot.kill, "start": self.bot.start}
        if action not in actions:
            raise BadRequest("action must be stop, kill or start")
        try:
            await actions[action]()
        except BotControlError as exc:
            return web.json_response({"error": str(exc)}, status=409)
        _log.info("playground.bot_control", action=action)
        return web.json_response({"bot": self.view.bot_status()})

    # live updates

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        await response.write(b"retry: 1000\nevent: hello\ndata: {}\n\n")
        signal = self.fake.state.changed
        seen = signal.count
        tree, channels = self.view.fingerprints()
        try:
            while not self._closing.is_set():
                try:
                    async with asyncio.timeout(KEEPALIVE_SECONDS):
                        # Any change since the fingerprints were taken, not only the next
                        # one: a change made while an event was being written would
                        # otherwise wait for another before the page heard of it.
                        await signal.wait_for(_changed_since(signal, seen))
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if self._closing.is_set():
                    break
                await asyncio.sleep(COALESCE_SECONDS)  # rate limit: one event per burst
                seen = signal.count
                new_tree, new_channels = self.view.fingerprints()
                changed = [
                    str(cid) for cid, value in new_channels.items() if channels.get(cid) != value
                ]
                if new_tree == tree and not changed:
                    continue
                payload = {"tree": new_tree != tree, "channels": changed}
                tree, channels = new_tree, new_channels
                await response.write(f"data: {json.dumps(payload)}\n\n".encode())
        except ConnectionResetError:
            pass  # the page went away; nothing to tell it
        return response


def _changed_since(signal: Any, count: int) -> Callable[[], bool | None]:
    """A probe for ``signal.wait_for``: true once ``signal`` has changed after ``count``."""
    return lambda: True if signal.count != count else None


async def _upload(request: web.Request) -> tuple[Json, list[UserFile]]:
    """The text fields and ``files`` parts of a multipart message, within Discord's limits.

    Each file is read in chunks and refused as soon as it passes the limit, so an
    oversized upload costs at most the limit in memory, and the error names the file.
    """
    fields: Json = {}
    files: list[UserFile] = []
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise BadRequest("nested multipart bodies are not accepted")
        if part.name != "files":
            text = await _read(part, FIELD_MAX_BYTES, f"the {part.name} field is too long")
            fields[part.name or ""] = text.decode("utf-8", "replace")
            continue
        if len(files) == MAX_FILES:
            raise BadRequest(f"Discord allows {MAX_FILES} files per message at most")
        name = part.filename or "file"
        megabytes = MAX_FILE_BYTES // (1024 * 1024)
        data = await _read(
            part, MAX_FILE_BYTES, f"{name} is larger than Discord's {megabytes} MB per file"
        )
        files.append((name, data, part.headers.get("Content-Type") or None))
    return fields, files


async def _read(part: BodyPartReader, limit: int, too_large: str) -> bytes:
    """A part's bytes, refused with ``too_large`` as soon as they pass ``limit``."""
    data = bytearray()
    while chunk := await part.read_chunk(READ_CHUNK):
        data += chunk
        if len(data) > limit:
            raise BadRequest(too_large)
    return bytes(data)


def _jsonable(value: Any) -> Any:
    """Ids (ints) as strings, so the page's JavaScript never rounds a snowflake."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value
