"""Opening the database engine, tuned per dialect.

SQLite is the embedded default; every connection gets WAL (readers never block
the writer), a busy timeout (a second process waits instead of failing),
foreign keys (off by default in SQLite) and ``synchronous=FULL`` so a committed
bind survives a power cut, not just a crash. Writers take ``BEGIN IMMEDIATE``
so two of them queue on the busy timeout instead of failing when one upgrades
a read lock. PostgreSQL through asyncpg is the scale-out store.

Three URL schemes are accepted:

- ``sqlite:///path`` (default): SQLAlchemy's synchronous pysqlite engine, driven
  from one dedicated thread by :class:`core.store.database.Database`;
- ``sqlite+aiosqlite:///path``: the asyncio engine over aiosqlite;
- ``postgresql+asyncpg://user@host/db``: the asyncio engine over asyncpg.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from core.errors import StoreError

__all__ = [
    "PG_MAX_OVERFLOW",
    "PG_POOL_SIZE",
    "SUPPORTED_DRIVERS",
    "create_engine",
    "parse_url",
    "redacted_url",
    "sqlite_pragmas",
]

SUPPORTED_DRIVERS = ("sqlite", "sqlite+aiosqlite", "postgresql+asyncpg")

PG_POOL_SIZE = 40
"""PostgreSQL connections a process keeps open, all of them, between units of work.

With 100 and more spawns in flight, a process has dozens of units of work
waiting for a connection at once. A pool only keeps ``pool_size`` connections:
any opened beyond it (SQLAlchemy's "overflow") is closed as soon as it is
returned, so a load above the kept size reconnects all the time, and each
connection costs a backend forked by the server, the startup and the driver's
type introspection round trips, and statements prepared again. SQLAlchemy's
default (5 kept, 10 more on demand) did that at every burst; so did 20 kept
plus 20 on demand under bench_shards' 200 spawns in flight (a few percent better
than the default per bot CPU-second, where 40 kept gained over 15%). Forty kept,
and none on demand, removes the churn: a process is one thread, so more units
in flight than that only wait longer for the same CPU, and they wait in the
pool's queue, which costs the server nothing.

A process then holds at most 40 pooled connections, plus one for the change
feed and one for its liveness lock: two processes fit PostgreSQL's default
``max_connections = 100`` with room for tools and administration. More
processes need a larger ``max_connections`` (or a smaller pool).
"""
PG_MAX_OVERFLOW = 0
"""Connections opened beyond :data:`PG_POOL_SIZE` in a burst: none, as they would be
closed again the moment they were returned (see :data:`PG_POOL_SIZE`)."""


def sqlite_pragmas(busy_timeout_ms: int) -> tuple[str, ...]:
    """The pragmas every SQLite connection runs; the benchmark's raw baseline uses the same."""
    return (
        "PRAGMA journal_mode=WAL",
        f"PRAGMA busy_timeout={int(busy_timeout_ms)}",
        "PRAGMA foreign_keys=ON",
        "PRAGMA synchronous=FULL",
    )


def redacted_url(url: str) -> str:
    """The URL with any password hidden, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable store url>"


def parse_url(url: str) -> URL:
    """Parse and check a store URL, or raise a StoreError saying what is accepted."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"store url {redacted_url(url)} is not a database URL") from exc
    if parsed.drivername not in SUPPORTED_DRIVERS:
        raise StoreError(
            f"store url uses driver {parsed.drivername!r}; "
            f"use one of {', '.join(SUPPORTED_DRIVERS)}"
        )
    return parsed


def create_engine(
    url: str, *, busy_timeout_ms: int = 5000, pg_schema: str | None = None
) -> Engine | AsyncEngine:
    """Build the engine for ``url``: synchronous for ``sqlite://``, asyncio otherwise.

    ``pg_schema`` puts every table of a PostgreSQL store in that schema (it must
    exist); several deployments, or test runs, can then share one database. A
    PostgreSQL pool keeps :data:`PG_POOL_SIZE` connections and does not ping them
    at checkout (see :meth:`core.store.database.Database.run` for what happens to
    one the server dropped).
    """
    parsed = parse_url(url)
    if parsed.drivername.startswith("sqlite"):
        # sqlite3's own implicit transactions fight SQLAlchemy's; turn them off
        # and issue BEGIN ourselves (the pattern from SQLAlchemy's pysqlite docs).
        connect_args: dict[str, Any] = {"isolation_level": None}
        if parsed.drivername == "sqlite":
            # One dedicated thread uses the connections, but it is not the thread
            # that opened the pool's first connection during start-up checks.
            connect_args["check_same_thread"] = False
            sync = create_sync_engine(parsed, connect_args=connect_args)
            engine: Engine | AsyncEngine = sync
        else:
            engine = create_async_engine(parsed, connect_args=connect_args)
            sync = engine.sync_engine
        _install_sqlite_pragmas(sync, busy_timeout_ms)
        return engine
    # No pool_pre_ping: it cost a round trip per checkout (a BEGIN, a ping and a
    # ROLLBACK with asyncpg). A connection the server dropped meanwhile fails at
    # its unit of work's first statement instead, and Database.run runs that unit
    # again on a new connection.
    kwargs: dict[str, Any] = {"pool_size": PG_POOL_SIZE, "max_overflow": PG_MAX_OVERFLOW}
    if pg_schema:
        kwargs["connect_args"] = {"server_settings": {"search_path": pg_schema}}
    return create_async_engine(parsed, **kwargs)


def _install_sqlite_pragmas(engine: Engine, busy_timeout_ms: int) -> None:
    pragmas = sqlite_pragmas(busy_timeout_ms)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
