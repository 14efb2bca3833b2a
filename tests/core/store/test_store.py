"""The store: schema versioning, UTC timestamps, SQLite pragmas, clear errors."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from core.errors import SchemaVersionError, StoreError
from core.store import SCHEMA_VERSION, Database, current_version, open_database
from core.store.tables import BindingRow, SchemaVersionRow
from tests.fixtures.stores import StoreFactory


class TestMigrations:
    async def test_fresh_store_is_current(self, database: Database) -> None:
        """Opening an empty database applies every migration once."""
        assert await current_version(database) == SCHEMA_VERSION
        rows = await database.run(
            lambda conn: conn.execute(select(SchemaVersionRow.version)).scalars().all()
        )
        assert rows == list(range(1, SCHEMA_VERSION + 1))

    async def test_reopen_applies_nothing(self, open_store: StoreFactory) -> None:
        """A second start finds the schema current and leaves it alone."""
        await open_store()
        db = await open_store()
        count = await db.run(
            lambda conn: conn.execute(text("SELECT count(*) FROM schema_version")).scalar()
        )
        assert count == SCHEMA_VERSION

    async def test_newer_database_is_refused(self, open_store: StoreFactory) -> None:
        """A database written by a newer threadbound stops start-up with both versions named."""
        db = await open_store()
        await db.run(
            lambda conn: conn.execute(
                SchemaVersionRow.__table__.insert().values(
                    version=SCHEMA_VERSION + 1,
                    description="from the future",
                    applied_at=datetime.now(timezone.utc),  # noqa: UP017
                )
            )
        )
        with pytest.raises(SchemaVersionError) as err:
            await open_store()
        assert f"schema version {SCHEMA_VERSION + 1}" in str(err.value)
        assert f"supports up to {SCHEMA_VERSION}" in str(err.value)


class TestTimestamps:
    async def test_round_trip_is_aware_utc(self, database: Database) -> None:
        """A timestamp written in any zone reads back as the same instant in UTC."""
        paris = datetime(2026, 6, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))

        def write(conn: Connection) -> None:
            with Session(conn) as session:
                session.add(
                    BindingRow(
                        binding_id="b1",
                        target_session_key="s",
                        target_kind="session",
                        channel="discord",
                        account_id="main",
                        conversation_id="1",
                        status="active",
                        bound_at=paris,
                        scope=str(2**62),
                    )
                )
                session.flush()

        def read(conn: Connection) -> BindingRow:
            with Session(conn) as session:
                return session.execute(select(BindingRow)).scalar_one()

        await database.run(write)
        row = await database.run(read)
        assert row.bound_at == paris
        assert row.bound_at.utcoffset() == timedelta(0)
        assert row.scope == str(2**62)

    async def test_naive_datetime_is_refused(self, database: Database) -> None:
        """A naive datetime is a caller bug and never reaches the database."""
        with pytest.raises(Exception, match="naive datetime"):
            await database.run(
                lambda conn: conn.execute(
                    SchemaVersionRow.__table__.insert().values(
                        version=99,
                        description="x",
                        applied_at=datetime(2026, 1, 1),  # noqa: DTZ001 - naive on purpose
                    )
                )
            )


class TestSqlite:
    async def test_pragmas(self, tmp_path: Path) -> None:
        """Every SQLite connection runs with WAL, a busy timeout, foreign keys and full sync."""
        values = []
        for scheme in ("sqlite", "sqlite+aiosqlite"):
            db = await open_database(f"{scheme}:///{tmp_path / scheme}.db", busy_timeout_ms=1234)
            try:
                values.append(
                    await db.run(
                        lambda conn: [
                            conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                            for name in (
                                "journal_mode",
                                "busy_timeout",
                                "foreign_keys",
                                "synchronous",
                            )
                        ]
                    )
                )
            finally:
                await db.close()
        assert values == [["wal", 1234, 1, 2]] * 2

    @pytest.mark.parametrize(
        ("url", "message"),
        [
            (
                "mysql+aiomysql://root@localhost/x",
                r"use one of sqlite, sqlite\+aiosqlite, postgresql\+asyncpg",
            ),
            ("not a url", "is not a database URL"),
        ],
    )
    async def test_bad_url(self, url: str, message: str) -> None:
        """An unusable store URL is a StoreError that says what is accepted."""
        with pytest.raises(StoreError, match=message):
            await open_database(url)

    async def test_unreachable_postgres_hides_password(self) -> None:
        """A server that does not answer is reported without the URL's password."""
        url = "postgresql+asyncpg://u:hunter2secret@127.0.0.1:1/db"
        with pytest.raises(StoreError) as err:
            await open_database(url)
        assert "hunter2secret" not in str(err.value)
        assert "cannot open the store" in str(err.value)


class TestRunSqlite:
    """``Database.run_sqlite``: the session log's append path on the ``sqlite://`` store."""

    @pytest.fixture
    async def db(self, tmp_path: Path) -> AsyncIterator[Database]:
        database = await open_database(f"sqlite:///{tmp_path / 'direct.db'}")
        await database.run(lambda conn: conn.exec_driver_sql("CREATE TABLE t (k TEXT PRIMARY KEY)"))
        yield database
        await database.close()

    @staticmethod
    def keys(conn: Connection) -> list[str]:
        return [row[0] for row in conn.exec_driver_sql("SELECT k FROM t ORDER BY k")]

    async def test_only_the_sync_sqlite_engine_has_it(self, tmp_path: Path) -> None:
        for scheme, direct in (("sqlite", True), ("sqlite+aiosqlite", False)):
            database = await open_database(f"{scheme}:///{tmp_path / scheme}.db")
            try:
                assert database.direct_sqlite is direct
            finally:
                await database.close()

    async def test_commits_in_an_immediate_transaction(self, db: Database) -> None:
        def insert(dbapi: Any, _dialect: Any, key: str) -> bool:
            dbapi.execute("INSERT INTO t VALUES (?)", (key,))
            return bool(dbapi.in_transaction)

        assert await db.run_sqlite(insert, "a") is True
        assert await db.run(self.keys) == ["a"]

    async def test_an_error_rolls_back_and_surfaces_as_cores(self, db: Database) -> None:
        """A driver error is Core's IntegrityError, as callers of run() see it; nothing of
        the failed transaction stays, and the next one works."""

        def insert_twice(dbapi: Any, dialect: Any) -> None:
            dbapi.execute("INSERT INTO t VALUES ('b')")
            with _core_errors(dialect):
                dbapi.execute("INSERT INTO t VALUES ('b')")

        with pytest.raises(IntegrityError):
            await db.run_sqlite(insert_twice)
        with pytest.raises(ValueError, match="boom"):
            await db.run_sqlite(lambda dbapi, _d: (dbapi.execute("INSERT INTO t VALUES ('c')"),
                                                   _raise(ValueError("boom"))))  # fmt: skip
        await db.run_sqlite(lambda dbapi, _d: dbapi.execute("INSERT INTO t VALUES ('d')"))
        assert await db.run(self.keys) == ["d"]

    async def test_a_call_cancelled_before_its_turn_never_runs(self, db: Database) -> None:
        """Like run_in_executor: cancelled while queued behind other work, it is not run;
        the SQLite thread is blocked deterministically by a unit of work that waits."""
        started, release = threading.Event(), threading.Event()
        ran: list[str] = []

        def blocker(_conn: Connection) -> None:
            started.set()
            release.wait()

        blocking = asyncio.ensure_future(db.run(blocker))
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        queued = asyncio.ensure_future(db.run_sqlite(lambda _dbapi, _d: ran.append("queued")))
        await asyncio.sleep(0)  # submitted to the thread, behind the blocker
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await blocking
        await db.run_sqlite(lambda _dbapi, _d: ran.append("next"))
        assert ran == ["next"]


def _raise(exc: BaseException) -> None:
    raise exc


@contextlib.contextmanager
def _core_errors(dialect: Any) -> Iterator[None]:
    base = dialect.loaded_dbapi.Error
    try:
        yield
    except base as exc:
        raise DBAPIError.instance("", None, exc, base, dialect=dialect) from exc
