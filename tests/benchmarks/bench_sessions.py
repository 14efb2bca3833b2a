"""Session log benchmarks: concurrent appends (group commit) and rehydration.

Run with ``python3 tb.py bench sessions``. Every figure is printed beside a
baseline measured in the same run, in alternating rounds, because absolute
times drift on shared machines; the issue's targets are printed with them.
Nothing here asserts.

1. Append throughput: 100 sessions appending concurrently (20,000 events in
   all) through ``SessionLog.append`` on the default ``sqlite://`` store,
   each append durable before it returns; baseline: raw ``sqlite3``
   single-row INSERT + COMMIT of the same rows with the same pragmas
   (target: at least 30% of the raw rate).
2. Rehydration of a session of 10,000 events whose active path has 5,000
   nodes, the rest on side branches (target < 150 ms, median of several
   loads); baseline: a raw ``sqlite3`` SELECT of the same rows.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.logging import configure_logging, reset_logging  # noqa: E402
from core.sessions import SessionLog, SessionTree  # noqa: E402
from core.store import open_database  # noqa: E402
from core.store.engine import sqlite_pragmas  # noqa: E402
from tests.fixtures.sessions import build_branched  # noqa: E402

SESSIONS = 100
EVENTS_PER_SESSION = 200
RAW_ROWS = 2_000
APPEND_ROUNDS = 3
LOADS = 9
PATH_NODES = 5_000
SIDE_EVERY = 10
SIDE_NODES = 7  # 500 forks x (7 side nodes + 3 system events) + 5,000 = 10,000 events


async def append_rate(path: Path) -> float:
    """Events per second: every session appends user/assistant turns as fast as commits allow."""
    db = await open_database(f"sqlite:///{path}")
    log = SessionLog(db)
    trees = [await log.load(f"bench:{i}") for i in range(SESSIONS)]

    async def session(tree: SessionTree) -> None:
        for i in range(EVENTS_PER_SESSION // 2):
            await log.append(
                tree, "user_message", {"text": f"question {i}"}, delivery_mode="normal"
            )
            await log.append(tree, "assistant_message", {"turn_id": f"t{i}", "text": "answer"})

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for tree in trees:
            group.create_task(session(tree))
    elapsed = time.perf_counter() - start
    assert all(tree.last_seq == EVENTS_PER_SESSION for tree in trees)
    await log.close()
    await db.close()
    return SESSIONS * EVENTS_PER_SESSION / elapsed


def raw_rate(path: Path, count: int) -> float:
    """Single-row INSERT + COMMIT into session_events, same pragmas, same row shape."""
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in sqlite_pragmas(5000):
        conn.execute(pragma)
    sql = (
        "INSERT INTO session_events (session_key, seq, node_id, parent_id, kind, type, "
        "payload, delivery_mode, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    parent = None
    start = time.perf_counter()
    for i in range(count):
        node = uuid.uuid4().hex
        payload = json.dumps({"text": f"question {i}", "requested_mode": "normal"})
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            sql,
            (f"raw:{i % SESSIONS}", i, node, parent, "user", "user_message", payload, "normal",
             "2026-01-01 00:00:00.000000"),
        )  # fmt: skip
        conn.execute("COMMIT")
        parent = node
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


async def bench_appends(workdir: Path) -> None:
    ours, raws = [], []
    for round_ in range(APPEND_ROUNDS):  # interleaved, so drift hits both alike
        ours.append(await append_rate(workdir / f"append-{round_}.db"))
        raw_path = workdir / f"raw-{round_}.db"
        await (await open_database(f"sqlite:///{raw_path}")).close()
        raws.append(raw_rate(raw_path, RAW_ROWS))
    ours_median, raw_median = statistics.median(ours), statistics.median(raws)
    ratio = ours_median / raw_median
    total = SESSIONS * EVENTS_PER_SESSION
    print(f"\n[1] append throughput, {SESSIONS} sessions appending concurrently, {total:,} events")
    print(f"    median of {APPEND_ROUNDS} rounds ({', '.join(f'{r:,.0f}' for r in ours)})")
    print(f"    SessionLog.append, sqlite:// store: {ours_median:,.0f} events/s (each durable)")
    print(f"    baseline raw sqlite3 single-row commits, same pragmas: {raw_median:,.0f} rows/s")
    met = "MET" if ratio >= 0.3 else "MISSED"
    print(f"    ratio append/raw: {ratio:.2f}   target >= 0.30   {met}")


def raw_read(path: Path, key: str) -> float:
    conn = sqlite3.connect(path)
    start = time.perf_counter()
    conn.execute(
        "SELECT * FROM session_events WHERE session_key = ? ORDER BY seq", (key,)
    ).fetchall()
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


async def bench_rehydrate(workdir: Path) -> None:
    path = workdir / "rehydrate.db"
    db = await open_database(f"sqlite:///{path}")
    log = SessionLog(db)
    tree = build_branched("bench:big", path_nodes=PATH_NODES, side_every=SIDE_EVERY,
                          side_nodes=SIDE_NODES)  # fmt: skip
    await log.import_tree(tree)
    loaded = await log.load(tree.session_key)  # warm-up: cold caches, first query compile
    assert loaded == tree
    assert len(loaded.path()) == PATH_NODES, len(loaded.path())
    loads, raws = [], []
    for _ in range(LOADS):
        start = time.perf_counter()
        reloaded = await log.load(tree.session_key)
        loads.append(time.perf_counter() - start)
        # Freed after the clock stops: freeing a tree (3-4 ms for 10k events) is
        # the cost of the eviction that preceded a rehydration, not of the load.
        del reloaded
        raws.append(raw_read(path, tree.session_key))
    await db.close()
    median, raw = statistics.median(loads), statistics.median(raws)
    print(
        f"\n[2] rehydrate a session of {len(tree):,} events, active path {PATH_NODES:,} nodes, "
        f"{len(tree.branches) - 1} side branches (median of {LOADS})"
    )
    met = "MET" if median < 0.150 else "MISSED"
    print(f"    SessionLog.load: {median * 1000:.1f} ms   target < 150 ms   {met}")
    print(f"    (loads: {', '.join(f'{t * 1000:.0f}' for t in sorted(loads))} ms)")
    print(
        f"    baseline raw sqlite3 SELECT of the same rows: {raw * 1000:.1f} ms "
        f"({median / raw:.1f}x)"
    )


async def main() -> None:
    configure_logging(enabled=False)
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        workdir = Path(tmp)
        await bench_appends(workdir)
        await bench_rehydrate(workdir)
    reset_logging()


if __name__ == "__main__":
    asyncio.run(main())
