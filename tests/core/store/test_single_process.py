"""One bot process per SQLite file: a second is refused, a dead one frees the file."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from core.errors import StoreError
from core.store import open_database

ROOT = Path(__file__).resolve().parents[3]
HOLDER = """
import asyncio
import sys
from pathlib import Path
from core.store.single_process import ProcessLock
lock = ProcessLock(Path(sys.argv[1]))
lock.acquire()
print("holding", flush=True)
sys.stdin.read()
"""


async def test_a_second_opening_is_refused_naming_postgresql(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    first = await open_database(url, single_process=True)
    try:
        with pytest.raises(StoreError, match="PostgreSQL") as err:
            await open_database(url, single_process=True)
        assert "another bot process" in str(err.value)
        tool = await open_database(url)  # a tool reading the store is not a bot process
        await tool.close()
    finally:
        await first.close()
    again = await open_database(url, single_process=True)  # closed: free again
    await again.close()


async def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    database = tmp_path / "bot.db"
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HOLDER,
        str(database),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None
        async with asyncio.timeout(30):
            assert (await holder.stdout.readline()).strip() == b"holding"
        with pytest.raises(StoreError, match="another bot process"):
            await open_database(f"sqlite:///{database}", single_process=True)
    finally:
        holder.kill()  # kill -9: nothing of it runs to clean up
        await holder.wait()
    opened = await open_database(f"sqlite:///{database}", single_process=True)
    await opened.close()
