"""The gateway websocket: HELLO, IDENTIFY → READY + GUILD_CREATE, heartbeats, RESUME, dispatch.

Each connection has one writer task fed by a queue, so dispatching is a synchronous call
(REST handlers and the test driver never await a socket) and events reach a client in
the order they were dispatched. A session outlives its connection until the client
closes with 1000/1001, so a RESUME replays what was missed, as on Discord.

Synchronisation without sleeps: the server may send opcode 1 and the client must answer
with a heartbeat at once. discord.py handles websocket messages strictly in order, so
when that heartbeat arrives every earlier event has been parsed into the client's cache.
:meth:`Gateway.sync` and the "ready" mark (set after the GUILD_CREATEs) are built on it.

Heartbeat ACKs: discord.py measures latency as the ACK's arrival minus the time its
keep-alive thread recorded for the last heartbeat sent, and warns "Can't keep up, ...
websocket is N s behind" above 10 s. That thread records the time only after the send
has completed on the event loop; on loopback an ACK sent at once can be read before it
does, and is then measured against the heartbeat before, a whole interval earlier (the
warning an idle bot printed every few minutes, always the interval). So the fake never
ACKs a heartbeat it did not ask for: it asks for one at once (opcode 1, which Discord
may send any time) and ACKs that. discord.py records the time of a requested heartbeat
on the event loop before sending it, so the ACK is measured from it, whatever the
thread does. Requested and unrequested heartbeats are told apart by counting requests.

Presence: a bot is online while one of its connections has identified (or resumed),
offline otherwise (stopped, killed, or its session lost); a change is dispatched as
PRESENCE_UPDATE to the sessions with the GUILD_PRESENCES intent of the guilds it is in.

Shards: an IDENTIFY with ``shard: [id, count]`` opens a session that gets only that
shard's guilds and their events, interactions included (guild ``g`` is on shard
``(g >> 22) % count``, DMs on shard 0), as on Discord. A bot's sessions may belong to
one process or to several; readiness is per shard (:meth:`Gateway.ready_shards`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import zlib
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from fakediscord import payloads
from fakediscord.models import Message
from fakediscord.snowflake import shard_of
from fakediscord.state import State

__all__ = ["Gateway", "GatewaySession", "Intents", "SentEvent"]

Json = dict[str, Any]
Render = Callable[[int], Json]
"""Builds an event's payload for the bot with this user id (payloads differ per viewer)."""

HELLO, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, REQUEST_MEMBERS = 10, 1, 2, 6, 7, 8
INVALID_SESSION, HEARTBEAT_ACK, DISPATCH = 9, 11, 0
BACKLOG = 1000
"""Events kept per session for RESUME; older ones are lost, as on Discord."""


class Intents:
    """The gateway intent bits the fake filters on."""

    GUILDS = 1 << 0
    GUILD_MEMBERS = 1 << 1
    GUILD_WEBHOOKS = 1 << 5
    GUILD_PRESENCES = 1 << 8
    GUILD_MESSAGES = 1 << 9
    GUILD_MESSAGE_REACTIONS = 1 << 10
    MESSAGE_CONTENT = 1 << 15


@dataclass(slots=True)
class SentEvent:
    """A dispatch as one bot received it (for tests asserting on gateway traffic).

    ``session_id`` and ``shard`` say which of the bot's sessions got it: with several
    shards (in one process or several) each guild's events go to its shard's only.
    """

    user_id: int
    name: str
    seq: int
    data: Json
    session_id: str | None = None
    shard: tuple[int, int] | None = None

    @property
    def shard_id(self) -> int:
        """The shard it went to; an unsharded session is shard 0 of 1."""
        return _shard_id(self.shard)


@dataclass(eq=False)
class GatewaySession:
    """One IDENTIFY: who, with which intents and shard, and what it was sent."""

    id: str
    user_id: int
    token: str
    intents: int
    shard: tuple[int, int] | None
    ordinal: int = 0
    """Which IDENTIFY opened it: its position in :attr:`Gateway.identifies`, from 1."""
    compression: str | None = None
    """The transport compression the client asked for (``zlib-stream``), if any."""
    seq: int = 0
    ready: bool = False
    connection: _Connection | None = None
    backlog: deque[Json] = field(default_factory=lambda: deque(maxlen=BACKLOG))

    @property
    def shard_id(self) -> int:
        """This session's shard; an unsharded session is shard 0 of 1."""
        return _shard_id(self.shard)

    def wants(self, guild_id: int | None) -> bool:
        """Whether this session's shard carries events of ``guild_id``.

        Discord's rule: guild ``g`` is on shard ``(g >> 22) % count``. DMs (no guild, or
        guild 0 as an interaction outside a guild has) are on shard 0 only.
        """
        if self.shard is None:
            return True
        shard_id, count = self.shard
        return shard_of(guild_id or 0, count) == shard_id


class _Connection:
    """A websocket and its writer: frames go out in queue order, compressed if asked."""

    def __init__(self, ws: web.WebSocketResponse, compress: str | None) -> None:
        self.ws = ws
        self.queue: asyncio.Queue[Json | None] = asyncio.Queue()
        # zlib-stream is what discord.py asks for unless zstd is importable; for any other
        # scheme frames go out as uncompressed text, which discord.py reads as is.
        self.compression = compress
        self.compressor = zlib.compressobj() if compress == "zlib-stream" else None
        self.session: GatewaySession | None = None
        self.probes: deque[asyncio.Future[None] | None] = deque()
        """Heartbeats asked for and not yet answered, in order: a test's probe (its
        future), or None for one asked to time an ACK (see the module doc)."""
        self.acks = 0
        """Heartbeat ACKs sent on this connection."""
        self.writing = True
        """False once the writer has ended: frames sent after that are dropped, or a
        :meth:`Gateway.drain` would wait on the queue for ever (the reader may not
        have seen the socket close yet, so the connection is still listed)."""

    def send(self, frame: Json) -> None:
        if self.writing:
            self.queue.put_nowait(frame)

    def finish(self) -> None:
        """Tell the writer to stop once what is queued has been written."""
        if self.writing:
            self.queue.put_nowait(None)

    def probe(self) -> asyncio.Future[None]:
        """Ask for a heartbeat; the future resolves when it arrives (see module doc)."""
        future = asyncio.get_running_loop().create_future()
        self.probes.append(future)
        self.send({"op": HEARTBEAT, "d": None})
        return future

    def heartbeat(self) -> None:
        """A heartbeat arrived: ACK one that was asked for; ask for one in place of any other.

        An unrequested heartbeat is the client's own (its keep-alive thread's); ACKed at
        once it could be measured against the previous one (see the module doc).
        """
        if not self.probes:
            self.probes.append(None)
            self.send({"op": HEARTBEAT, "d": None})
            return
        asked = self.probes.popleft()
        if asked is not None and not asked.done():
            asked.set_result(None)
        self.acks += 1
        self.send({"op": HEARTBEAT_ACK, "d": None})

    async def write_loop(self) -> None:
        """Write frames until the ``None`` sentinel; then discard what is left."""
        try:
            while True:
                frame = await self.queue.get()
                try:
                    if frame is None or not await self._write(frame):
                        return
                finally:
                    self.queue.task_done()
        finally:
            self.writing = False
            while not self.queue.empty():
                self.queue.get_nowait()
                self.queue.task_done()
            for probe in self.probes:
                if probe is not None and not probe.done():
                    probe.set_exception(ConnectionError("the bot's gateway connection closed"))

    async def _write(self, frame: Json) -> bool:
        data = json.dumps(frame, separators=(",", ":"))
        try:
            if self.compressor is None:
                await self.ws.send_str(data)
            else:
                chunk = self.compressor.compress(data.encode())
                await self.ws.send_bytes(chunk + self.compressor.flush(zlib.Z_SYNC_FLUSH))
        except (ConnectionError, RuntimeError):
            return False  # the client went away; the reader notices and cleans up
        return True


class Gateway:
    """All gateway sessions of one fake Discord."""

    def __init__(self, state: State, url: Callable[[], str], *, heartbeat_ms: int) -> None:
        self._state = state
        self._url = url
        self._heartbeat_ms = heartbeat_ms
        self._connections: set[_Connection] = set()
        self.sessions: dict[str, GatewaySession] = {}
        self.sent: deque[SentEvent] = deque(maxlen=10_000)
        self.identifies: list[Json] = []

    # public surface

    def dispatch(
        self,
        event: str,
        render: Render,
        *,
        guild_id: int | None,
        intent: int | None,
        user_ids: Collection[int] | None = None,
        message: Message | None = None,
    ) -> None:
        """Send ``event`` to every session that may see it.

        A session sees it when its bot is in the guild, its shard carries the guild, its
        intents include ``intent`` and (if given) its user is in ``user_ids``. For a
        ``message`` event, sessions without MESSAGE_CONTENT get blank content unless the
        bot wrote or is mentioned in it.
        """
        guild = self._state.guilds.get(guild_id) if guild_id is not None else None
        for session in list(self.sessions.values()):
            if guild is not None and session.user_id not in guild.members:
                continue
            if not session.wants(guild_id) or (intent is not None and not session.intents & intent):
                continue
            if user_ids is not None and session.user_id not in user_ids:
                continue
            data = render(session.user_id)
            if message is not None and not _may_read(session, message):
                data |= {"content": "", "embeds": [], "attachments": [], "components": []}
            self._send_dispatch(session, event, data)

    async def sync(self, user_id: int) -> None:
        """Return once the bot's clients have parsed everything dispatched to them so far.

        Every connection of the bot is probed, so with several shards (in one process
        or several) this waits for all of them.
        """
        connections = [c for c in self._connections if c.session and c.session.user_id == user_id]
        if not connections:
            raise LookupError(f"bot {user_id} has no gateway connection")
        await asyncio.gather(*(c.probe() for c in connections))

    def heartbeat_acks(self, user_id: int) -> int:
        """Heartbeat ACKs sent to the bot's current connections (tests count them)."""
        return sum(c.acks for c in self._connections if c.session and c.session.user_id == user_id)

    def is_ready(self, user_id: int) -> GatewaySession | None:
        """One ready, connected session of the bot, if any (the first one identified).

        A sharded bot is ready per shard: ask :meth:`ready_shards` which of them are.
        """
        for session in self.sessions.values():
            if session.user_id == user_id and session.ready and session.connection:
                return session
        return None

    def ready_shards(self, user_id: int, *, since: int = 0) -> set[int]:
        """The shard ids of the bot's ready, connected sessions (unsharded: shard 0).

        ``since`` counts only sessions opened after the first ``since`` IDENTIFYs: take
        ``len(gateway.identifies)`` before starting a process to wait for its shards,
        not for those of a process just killed whose socket the fake has not yet seen
        close.
        """
        return {
            session.shard_id
            for session in self.sessions.values()
            if session.user_id == user_id
            and session.ready
            and session.connection is not None
            and session.ordinal > since
        }

    def presence(self, user_id: int) -> str:
        """``online`` while one of the user's gateway connections has identified, else
        ``offline`` (what Discord's member list shows)."""
        online = any(
            s.user_id == user_id and s.connection is not None for s in self.sessions.values()
        )
        return "online" if online else "offline"

    def reconnect(self, user_id: int) -> None:
        """Ask the bot's connections to reconnect (opcode 7); discord.py then RESUMEs."""
        for conn in self._connections:
            if conn.session and conn.session.user_id == user_id:
                conn.send({"op": RECONNECT, "d": None})

    def lose_sessions(self, user_id: int) -> None:
        """End the bot's gateway sessions on Discord's side, as a long outage does.

        Its connections are asked to reconnect (opcode 7); their RESUME is refused
        (INVALID_SESSION), so discord.py IDENTIFYs anew and gets a ``READY``, not a
        ``RESUMED``. What is dispatched in between reaches no session: lost, as on Discord.
        """
        before = self.presence(user_id)
        for session in [s for s in self.sessions.values() if s.user_id == user_id]:
            del self.sessions[session.id]
            conn, session.connection = session.connection, None
            if conn is not None:
                conn.session = None
                conn.send({"op": RECONNECT, "d": None})
        self._announce_presence(user_id, before)
        self._state.changed.notify()

    async def drain(self) -> None:
        """Wait until every queued frame has been written to its socket."""
        await asyncio.gather(*(c.queue.join() for c in list(self._connections)))

    async def close_all(self) -> None:
        for conn in list(self._connections):
            await conn.ws.close(code=1001, message=b"fake Discord is stopping")

    # websocket handling

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        conn = _Connection(ws, request.query.get("compress"))
        self._connections.add(conn)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(conn.write_loop())
                try:
                    await self._serve(conn, request)
                finally:
                    conn.finish()
        finally:
            self._connections.discard(conn)
            self._detach(conn, ws.close_code)
        return ws

    async def _serve(self, conn: _Connection, request: web.Request) -> None:
        if request.query.get("encoding", "json") != "json":
            await conn.ws.close(code=4002, message=b"fake Discord speaks JSON only")
            return
        conn.send({"op": HELLO, "d": {"heartbeat_interval": self._heartbeat_ms}})
        async for msg in conn.ws:
            if msg.type is not WSMsgType.TEXT:
                continue
            try:
                frame = json.loads(msg.data)
                op, data = frame.get("op"), frame.get("d")
            except (ValueError, AttributeError):
                await conn.ws.close(code=4002, message=b"Error while decoding payload.")
                return
            if op == HEARTBEAT:
                conn.heartbeat()
            elif op == IDENTIFY:
                await self._identify(conn, data)
            elif op == RESUME:
                self._resume(conn, data)
            elif op == REQUEST_MEMBERS:
                self._request_members(conn, data)

    async def _identify(self, conn: _Connection, data: Json) -> None:
        self.identifies.append(data)
        account = self._state.bot_by_token(str(data.get("token", "")))
        if account is None:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        if conn.session is not None:
            await conn.ws.close(code=4005, message=b"Already authenticated.")
            return
        shard = data.get("shard")
        if shard and not 0 <= int(shard[0]) < int(shard[1]):
            await conn.ws.close(code=4010, message=b"Invalid shard.")
            return
        before = self.presence(account.user_id)
        session = GatewaySession(
            id=secrets.token_hex(16),
            user_id=account.user_id,
            token=account.token,
            intents=int(data.get("intents", 0)),
            shard=(int(shard[0]), int(shard[1])) if shard else None,
            ordinal=len(self.identifies),
            compression=conn.compression,
            connection=conn,
        )
        self.sessions[session.id] = session
        conn.session = session
        guilds = [g for g in self._state.guilds.values() if account.user_id in g.members]
        guilds = [g for g in guilds if session.wants(g.id)]
        app = self._state.applications[account.application_id]
        ready: Json = {
            "v": 10,
            "user": payloads.user(self._state.users[account.user_id])
            | {"verified": True, "mfa_enabled": False, "email": None},
            "guilds": [{"id": str(g.id), "unavailable": True} for g in guilds],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self._url(),
            "application": {"id": str(app.id), "flags": app.flags},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
        }
        if session.shard is not None:
            ready["shard"] = list(session.shard)
        self._send_dispatch(session, "READY", ready)
        for guild in guilds:
            self._send_dispatch(session, "GUILD_CREATE", payloads.guild_create(self._state, guild))
        conn.probe().add_done_callback(lambda f: self._mark_ready(session, f))
        self._announce_presence(account.user_id, before)

    def _mark_ready(self, session: GatewaySession, probe: asyncio.Future[None]) -> None:
        if not probe.cancelled() and probe.exception() is None:
            session.ready = True
            self._state.changed.notify()

    def _resume(self, conn: _Connection, data: Json) -> None:
        session = self.sessions.get(str(data.get("session_id")))
        if session is None or session.token != data.get("token") or conn.session is not None:
            conn.send({"op": INVALID_SESSION, "d": False})
            return
        before = self.presence(session.user_id)
        if session.connection is not None:
            session.connection.session = None
            session.connection.send({"op": RECONNECT, "d": None})
        session.connection, conn.session = conn, session
        self._announce_presence(session.user_id, before)
        last = int(data.get("seq") or 0)
        for frame in session.backlog:
            if frame["s"] > last:
                conn.send(frame)
        self._send_dispatch(session, "RESUMED", {})
        conn.probe().add_done_callback(lambda f: self._mark_ready(session, f))

    def _request_members(self, conn: _Connection, data: Json) -> None:
        session = conn.session
        guild = self._state.guilds.get(int(data.get("guild_id", 0)))
        if session is None or guild is None:
            return
        wanted = {int(i) for i in data.get("user_ids") or ()}
        query = str(data.get("query") or "").lower()
        members = [
            payloads.member(self._state, m)
            for m in guild.members.values()
            if (not wanted or m.user_id in wanted)
            and self._state.users[m.user_id].username.lower().startswith(query)
        ]
        chunk: Json = {
            "guild_id": str(guild.id),
            "members": members,
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [str(i) for i in wanted - set(guild.members)],
        }
        if data.get("nonce"):
            chunk["nonce"] = data["nonce"]
        self._send_dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)

    def _send_dispatch(self, session: GatewaySession, event: str, data: Json) -> None:
        session.seq += 1
        frame = {"op": DISPATCH, "t": event, "s": session.seq, "d": data}
        session.backlog.append(frame)
        self.sent.append(
            SentEvent(session.user_id, event, session.seq, data, session.id, session.shard)
        )
        if session.connection is not None:
            session.connection.send(frame)

    def _detach(self, conn: _Connection, close_code: int | None) -> None:
        session = conn.session
        if session is None or session.connection is not conn:
            return
        before = self.presence(session.user_id)
        session.connection = None
        session.ready = False
        if close_code in (1000, 1001):
            # A clean close ends the session on Discord: it can no longer be resumed.
            self.sessions.pop(session.id, None)
        self._announce_presence(session.user_id, before)
        self._state.changed.notify()

    def _announce_presence(self, user_id: int, before: str) -> None:
        """PRESENCE_UPDATE in each of the user's guilds, if its presence changed."""
        status = self.presence(user_id)
        if status == before:
            return
        self._state.changed.notify()
        for guild in self._state.guilds.values():
            if user_id not in guild.members:
                continue
            data: Json = {
                "user": {"id": str(user_id)},
                "guild_id": str(guild.id),
                "status": status,
                "activities": [],
                "client_status": {"web": status} if status == "online" else {},
            }
            self.dispatch(
                "PRESENCE_UPDATE", _same(data), guild_id=guild.id, intent=Intents.GUILD_PRESENCES
            )


def _same(data: Json) -> Render:
    """A payload every viewer gets alike."""
    return lambda _: data


def _shard_id(shard: tuple[int, int] | None) -> int:
    return shard[0] if shard is not None else 0


def _may_read(session: GatewaySession, message: Message) -> bool:
    return bool(
        session.intents & Intents.MESSAGE_CONTENT
        or message.author_id == session.user_id
        or session.user_id in message.mention_ids
        or message.guild_id is None
    )
