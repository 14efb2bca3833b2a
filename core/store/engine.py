"""Opening the database: one async engine, tuned per dialect.

SQLite is the embedded default; each connection gets WAL (readers never block
the writer), a busy timeout (a second process waits instead of failing), foreign
keys (off by default in SQLite) and ``synchronous=FULL`` so a committed bind
survives a power cut, not just a crash. PostgreSQL through asyncpg is the
scale-out store for several bot processes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from core.errors import StoreError

__all__ = ["SQLITE_PRAGMAS", "create_engine", "redacted_url"]

SUPPORTED_DRIVERS = ("sqlite+aiosqlite", "postgresql+asyncpg")


def SQLITE_PRAGMAS(busy_timeout_ms: int) -> tuple[str, ...]:
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


def create_engine(
    url: str, *, busy_timeout_ms: int = 5000, pg_schema: str | None = None, echo: bool = False
) -> AsyncEngine:
    """Build the async engine for ``url`` or raise a StoreError saying what is accepted.

    ``pg_schema`` puts every table of a PostgreSQL store in that schema (it must
    exist); several deployments, or test runs, can then share one database.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"store url {redacted_url(url)} is not a database URL") from exc
    if parsed.drivername not in SUPPORTED_DRIVERS:
        raise StoreError(
            f"store url uses driver {parsed.drivername!r}; "
            f"use one of {', '.join(SUPPORTED_DRIVERS)}"
        )
    kwargs: dict[str, Any] = {"echo": echo}
    if parsed.drivername.startswith("sqlite"):
        # sqlite3's own transaction handling fights SQLAlchemy's; let SQLAlchemy
        # issue BEGIN itself (the pattern from SQLAlchemy's pysqlite docs).
        kwargs["connect_args"] = {"isolation_level": None}
    else:
        kwargs["pool_pre_ping"] = True
        if pg_schema:
            kwargs["connect_args"] = {"server_settings": {"search_path": pg_schema}}
    engine = create_async_engine(url, **kwargs)
    if parsed.drivername.startswith("sqlite"):
        _install_sqlite_pragmas(engine, busy_timeout_ms)
    return engine


def _install_sqlite_pragmas(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    pragmas = SQLITE_PRAGMAS(busy_timeout_ms)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # With the driver's autocommit on, start transactions explicitly; IMMEDIATE
        # takes the write lock up front so two writers queue on busy_timeout instead
        # of failing with "database is locked" when one upgrades a read lock.
        conn.exec_driver_sql("BEGIN IMMEDIATE")
