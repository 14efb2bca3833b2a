"""Telling the other bot processes what changed: PostgreSQL's LISTEN/NOTIFY.

Every process keeps bindings and runtime overrides in memory (reads are a
dict lookup), so a change one process makes must reach the others, or each
would go on routing by its own stale copy. A unit of work that changes such
a row calls :func:`announce`; PostgreSQL delivers the notification when the
transaction commits (never for one rolled back), to every process that
listens on the store's channel. :class:`ChangeFeed` is the listening side: a
dedicated asyncpg connection whose notifications are handed, in order, to
the handlers of their topic.

A notification is not a queue: one sent while a listener was disconnected
is gone. So each time the feed (re)connects, after LISTEN has taken effect,
it runs the resync handlers, which reload everything they mirror; nothing a
process missed stays missed.

SQLite serves one process, which has nobody to tell: there both are no-ops.
The channel is per schema (``threadbound_<schema>``), so deployments sharing
one database apart by schema do not hear each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from core.logging import get_logger

__all__ = ["CHANNEL_PREFIX", "ORIGIN_KEY", "ChangeFeed", "announce", "channel_for"]

_log = get_logger("core.store.changes")

CHANNEL_PREFIX = "threadbound_"
ORIGIN_KEY = "threadbound.origin"
"""Key of the connection info naming the :class:`Database` a connection belongs to,
so a process can skip the notifications it sent itself."""

_NOTIFY = text(f"SELECT pg_notify('{CHANNEL_PREFIX}' || current_schema(), :payload)")

Handler = Callable[[Mapping[str, Any]], Awaitable[None]]
Resync = Callable[[], Awaitable[Any]]


def channel_for(schema: str) -> str:
    return f"{CHANNEL_PREFIX}{schema}"


def announce(conn: Connection, topic: str, **data: str) -> None:
    """Within a unit of work: tell the other processes, at commit, that ``topic`` changed."""
    if conn.dialect.name != "postgresql":
        return
    payload = json.dumps({"topic": topic, "origin": conn.info.get(ORIGIN_KEY), **data})
    conn.execute(_NOTIFY, {"payload": payload})


class ChangeFeed:
    """Listens for other processes' changes and hands them to handlers, per topic.

    Args:
        url: the store's SQLAlchemy URL (``postgresql+asyncpg://...``).
        schema: the store's schema, or None for the server's default.
        origin: this process's :attr:`Database.origin`; its own notifications are skipped.
        retry_seconds: wait between reconnection attempts.
        check_seconds: how often an idle connection is checked to be alive.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None,
        origin: str,
        retry_seconds: float = 1.0,
        check_seconds: float = 5.0,
    ) -> None:
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._schema = schema
        self._origin = origin
        self._retry = retry_seconds
        self._check = check_seconds
        self._handlers: dict[str, list[Handler]] = {}
        self._resyncs: list[Resync] = []
        self.connected = asyncio.Event()
        """Set while listening (after the resync that follows each connection)."""
        self.connections = 0
        """How many times the feed has connected (a test can wait for a reconnection)."""

    def on(self, topic: str, handler: Handler) -> None:
        self._handlers.setdefault(topic, []).append(handler)

    def on_resync(self, handler: Resync) -> None:
        """Called after every (re)connection: reload what this process mirrors."""
        self._resyncs.append(handler)

    async def run(self) -> None:
        """Listen until cancelled, reconnecting after every loss."""
        while True:
            try:
                await self._listen_once()
            except Exception as exc:  # a lost server, a failed resync: reconnect, resync again
                _log.warning("changes.disconnected", error=f"{type(exc).__name__}: {exc}")
            self.connected.clear()
            await asyncio.sleep(self._retry)

    async def _listen_once(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # only a PostgreSQL store listens

        settings = {"search_path": self._schema} if self._schema else None
        conn = await asyncpg.connect(self._dsn, server_settings=settings)
        try:
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c: lost.set())
            queue: asyncio.Queue[str] = asyncio.Queue()
            schema = self._schema or str(await conn.fetchval("SELECT current_schema()"))
            channel = channel_for(schema)
            await conn.add_listener(
                channel, lambda _c, _pid, _ch, payload: queue.put_nowait(payload)
            )
            self.connections += 1
            await self._resync()  # whatever changed while nobody here was listening
            self.connected.set()
            _log.info("changes.listening", channel=channel, connections=self.connections)
            await self._consume(conn, queue, lost)
        finally:
            self.connected.clear()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), timeout=2)

    async def _consume(self, conn: Any, queue: asyncio.Queue[str], lost: asyncio.Event) -> None:
        lost_wait = asyncio.ensure_future(lost.wait())
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {getter, lost_wait}, timeout=self._check, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    await self._dispatch(getter.result())
                    continue
                getter.cancel()
                if lost_wait in done:
                    raise ConnectionError("the listening connection was closed")
                # Quiet for a while: make sure the connection is still there.
                await asyncio.wait_for(conn.fetchval("SELECT 1"), timeout=self._check)
        finally:
            lost_wait.cancel()

    async def _dispatch(self, raw: str) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            _log.warning("changes.unreadable", size=len(raw))
            return
        if not isinstance(message, dict) or message.get("origin") == self._origin:
            return
        for handler in self._handlers.get(str(message.get("topic")), ()):
            try:
                await handler(message)
            except Exception:
                _log.error("changes.handler_failed", topic=message.get("topic"), exc_info=True)

    async def _resync(self) -> None:
        for handler in self._resyncs:
            await handler()
