"""Reads and writes of the session tables: the event log and its two projections.

Synchronous on purpose, like :mod:`core.bindings.repository`: each function is
a unit of work body that :meth:`core.store.database.Database.run` executes in
one transaction, on the SQLite thread or through the async engine. Events are
only ever inserted; the projections are upserted in the same transaction as
the events that change them, so they can never be ahead of or behind the log
after a commit.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    Connection,
    String,
    Text,
    bindparam,
    cast,
    delete,
    func,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from core.store.tables import SessionBranchRow, SessionEventRow, SessionHeadRow, table_of

__all__ = [
    "LoadedSession",
    "discard_session",
    "has_events",
    "load_session",
    "replace_projection",
    "session_keys",
    "session_of_node",
    "sessions_awaiting_approval",
    "write_events",
    "write_events_sqlite",
]

_E = table_of(SessionEventRow)
_H = table_of(SessionHeadRow)
_B = table_of(SessionBranchRow)

# Statements are built once (building them per call costs more than a SQLite
# INSERT). Each event is read as one JSON object built by the database, and a
# session's objects are validated by pydantic-core in one ``validate_json``
# call: per-row ``json.loads``, dicts and SQLAlchemy result processors would
# cost more than the query and the replay together.
_INSERT_EVENTS = _E.insert()


def _name(name: str) -> Any:
    return literal_column(f"'{name}'", String)


def _load_events(dialect: str) -> Any:
    if dialect == "sqlite":
        # SQLite keeps JSON as text (json() embeds it as an object, not a
        # string) and UTC as naive text; the "Z" makes it aware UTC.
        payload: Any = func.json(type_coerce(_E.c.payload, String))
        created_at: Any = type_coerce(_E.c.created_at, String) + "Z"
        build: Any = func.json_object
    else:
        payload, created_at, build = _E.c.payload, _E.c.created_at, func.json_build_object
    columns = {
        "session_key": _E.c.session_key,
        "node_id": _E.c.node_id,
        "parent_id": _E.c.parent_id,
        "seq": _E.c.seq,
        "kind": _E.c.kind,
        "type": _E.c.type,
        "payload": payload,
        "delivery_mode": _E.c.delivery_mode,
        "created_at": created_at,
    }
    obj = build(*(part for name, column in columns.items() for part in (_name(name), column)))
    stored = type_coerce(_E.c.payload, String) if dialect == "sqlite" else cast(_E.c.payload, Text)
    event = func.coalesce(_E.c.envelope + stored + "}", cast(obj, Text))
    return (
        select(event.label("event")).where(_E.c.session_key == bindparam("key")).order_by(_E.c.seq)
    )


_LOAD_EVENTS = {"sqlite": _load_events("sqlite"), "postgresql": _load_events("postgresql")}

# The same texts for the sqlite3 driver, built with printf: json_object() parsed
# every payload again (json()) only to embed it, which was a third of the query.
# The payload is embedded as stored (the JSON text its column's serializer
# wrote); the strings a person could have chosen (ids and types in an imported
# export) are quoted, as are NULLs; ``kind``, a closed vocabulary, is not.
#
# Rows written since schema version 9 carry their envelope (the event's JSON up to
# its payload, see core.sessions._writes.envelope): joining three texts is a
# third of printf's cost. Older rows (NULL) are built as before.
_SQLITE_LOAD_EVENTS = (
    "SELECT coalesce(envelope || payload || '}', "
    'printf(\'{"session_key":%s,"node_id":%s,"parent_id":%s,"seq":%d,'
    '"kind":"%s","type":%s,"delivery_mode":%s,"created_at":"%sZ",'
    '"payload":%s}\', ?, json_quote(node_id), json_quote(parent_id), seq, kind, '
    "json_quote(type), json_quote(delivery_mode), created_at, payload)) "
    "FROM session_events WHERE session_key = ? ORDER BY seq"
)
_LOAD_HEAD = select(_H.c.active_branch_id, _H.c.head_node_id, _H.c.last_seq).where(
    _H.c.session_key == bindparam("key")
)
_LOAD_BRANCHES = select(_B.c.branch_id, _B.c.head_node_id).where(
    _B.c.session_key == bindparam("key")
)
_HAS_EVENTS = select(_E.c.seq).where(_E.c.session_key == bindparam("key")).limit(1)
_SESSION_KEYS = select(_H.c.session_key).order_by(_H.c.session_key)
_DELETE_BRANCHES = delete(_B).where(_B.c.session_key == bindparam("key"))
_SESSION_OF_NODE = select(_E.c.session_key).where(_E.c.node_id == bindparam("node_id"))
_APPROVAL_COUNTS = (
    select(_E.c.session_key, _E.c.type, func.count())
    .where(_E.c.type.in_(("approval.requested", "approval.decided")))
    .group_by(_E.c.session_key, _E.c.type)
)


def _upserts(insert: Any) -> tuple[Any, Any]:
    """(heads, branches) upserts for one dialect; both SQLite and PostgreSQL say ON CONFLICT."""
    heads = insert(_H)
    heads = heads.on_conflict_do_update(
        index_elements=[_H.c.session_key],
        set_={
            "active_branch_id": heads.excluded.active_branch_id,
            "head_node_id": heads.excluded.head_node_id,
            "last_seq": heads.excluded.last_seq,
            "updated_at": heads.excluded.updated_at,
        },
    )
    branches = insert(_B)
    branches = branches.on_conflict_do_update(
        index_elements=[_B.c.session_key, _B.c.branch_id],
        set_={"head_node_id": branches.excluded.head_node_id},
    )
    return heads, branches


_UPSERTS = {"sqlite": _upserts(sqlite.insert), "postgresql": _upserts(postgresql.insert)}

LoadedSession = tuple[str, tuple[str, str | None, int] | None, dict[str, str | None]]
"""``(events as a JSON array, (active branch, head, last seq) or None, branch -> head)``.

The active branch's head is the head row's: appends leave its ``session_branches``
row behind (see :func:`core.sessions._writes.prepare_write`)."""


class _Prepared:
    """A Core statement as the ``sqlite3`` driver runs it: its SQL text, and how a row
    dict becomes the positional parameters (the columns' own bind processors, so a
    stored value is exactly what Core would have stored)."""

    __slots__ = ("columns", "sql")

    def __init__(self, statement: Any, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        table = statement.table
        self.sql = str(compiled)
        self.columns = [
            (name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in compiled.positiontup
        ]

    def run(self, dialect: Dialect, dbapi: Any, rows: list[dict[str, Any]]) -> None:
        """Run for every row."""
        columns = self.columns
        params = [
            tuple(row.get(name) if bind is None else bind(row.get(name)) for name, bind in columns)
            for row in rows
        ]
        with _as_core_errors(dialect, self.sql):
            dbapi.executemany(self.sql, params)


@contextmanager
def _as_core_errors(dialect: Dialect, sql: str) -> Iterator[None]:
    """A driver error raised as Core would raise it (``IntegrityError`` for a taken
    ``seq``, ``OperationalError``...), which is what callers catch."""
    base = dialect.loaded_dbapi.Error
    try:
        yield
    except base as exc:
        raise DBAPIError.instance(sql, None, exc, base, dialect=dialect) from exc


_PREPARED: weakref.WeakKeyDictionary[Dialect, tuple[_Prepared, _Prepared, _Prepared]] = (
    weakref.WeakKeyDictionary()
)


def _prepared(dialect: Dialect) -> tuple[_Prepared, _Prepared, _Prepared]:
    prepared = _PREPARED.get(dialect)
    if prepared is None:
        heads, branches = _UPSERTS["sqlite"]
        prepared = _PREPARED[dialect] = (
            _Prepared(_INSERT_EVENTS, dialect),
            _Prepared(heads, dialect),
            _Prepared(branches, dialect),
        )
    return prepared


def write_events(
    conn: Connection,
    events: list[dict[str, Any]],
    heads: list[dict[str, Any]],
    branches: list[dict[str, Any]],
) -> None:
    """Insert events (columns of ``session_events``) and upsert the projection rows.

    On the ``sqlite3`` driver the three statements go straight to the driver's
    ``executemany``, inside the transaction Core opened: this runs at every append,
    and Core's per-statement work (contexts, events, result set-up) cost several
    times what SQLite itself spends on the rows.
    """
    dialect = conn.dialect
    if dialect.driver == "pysqlite":
        write_events_sqlite(conn.connection.dbapi_connection, dialect, events, heads, branches)
        return
    heads_statement, branches_statement = _UPSERTS[dialect.name]
    conn.execute(_INSERT_EVENTS, events)
    conn.execute(heads_statement, heads)
    if branches:
        conn.execute(branches_statement, branches)


def write_events_sqlite(
    dbapi: Any,
    dialect: Dialect,
    events: list[dict[str, Any]],
    heads: list[dict[str, Any]],
    branches: list[dict[str, Any]],
) -> None:
    """:func:`write_events` on a ``sqlite3`` connection already in a transaction: the
    body of :meth:`Database.run_sqlite` for the session log's appends."""
    insert, heads_upsert, branches_upsert = _prepared(dialect)
    insert.run(dialect, dbapi, events)
    heads_upsert.run(dialect, dbapi, heads)
    if branches:
        branches_upsert.run(dialect, dbapi, branches)


def replace_projection(
    conn: Connection, key: str, head: dict[str, Any] | None, branches: list[dict[str, Any]]
) -> None:
    """Rewrite one session's projection rows from a replay (after a mismatch, or an import)."""
    heads_upsert, branches_upsert = _UPSERTS[conn.dialect.name]
    if head is not None:
        conn.execute(heads_upsert, [head])
    conn.execute(_DELETE_BRANCHES, {"key": key})
    if branches:
        conn.execute(branches_upsert, branches)


def has_events(conn: Connection, key: str) -> bool:
    return conn.execute(_HAS_EVENTS, {"key": key}).first() is not None


def load_session(conn: Connection, key: str) -> LoadedSession:
    """Every event row of ``key`` in ``seq`` order, with the projection rows, in one read."""
    dialect = conn.dialect
    events: Sequence[str]
    if dialect.driver == "pysqlite":  # Core's per-row result handling cost more than the rows
        dbapi: Any = conn.connection.dbapi_connection
        with _as_core_errors(dialect, _SQLITE_LOAD_EVENTS):
            rows = dbapi.execute(_SQLITE_LOAD_EVENTS, (json.dumps(key), key)).fetchall()
        events = [row[0] for row in rows]
    else:
        events = conn.execute(_LOAD_EVENTS[dialect.name], {"key": key}).scalars().all()
    head = conn.execute(_LOAD_HEAD, {"key": key}).first()
    branches = {row[0]: row[1] for row in conn.execute(_LOAD_BRANCHES, {"key": key})}
    if head is not None:  # the active branch's row is not kept up to date; its head is
        branches[head[0]] = head[1]
    # Joining the rows' texts is cheap; the array is parsed once, by pydantic-core.
    array = "[" + ",".join(events) + "]"
    return array, (head[0], head[1], head[2]) if head is not None else None, branches


def session_keys(conn: Connection) -> list[str]:
    return list(conn.execute(_SESSION_KEYS).scalars())


def session_of_node(conn: Connection, node_id: str) -> str | None:
    """The session an event belongs to (node ids are unique across sessions)."""
    return conn.execute(_SESSION_OF_NODE, {"node_id": node_id}).scalar()


def sessions_awaiting_approval(conn: Connection) -> list[str]:
    """Sessions with an approval request not yet decided: every request gets exactly one
    decision (a person's, the timeout's or a withdrawal), so the counts tell."""
    counts: dict[str, dict[str, int]] = {}
    for key, type_, count in conn.execute(_APPROVAL_COUNTS):
        counts.setdefault(key, {})[type_] = count
    return sorted(
        key
        for key, seen in counts.items()
        if seen.get("approval.requested", 0) > seen.get("approval.decided", 0)
    )


def discard_session(conn: Connection, key: str) -> None:
    """Remove a session's events and projections (only for a session that never started)."""
    for table in (_E, _H, _B):
        conn.execute(delete(table).where(table.c.session_key == key))
