"""Fixtures: a playground (fake Discord + web page, and the bot in this process or in its
own) with the demo model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest

from bot.playground import Playground
from core.config import Config, parse_config

T = TypeVar("T")
WAIT = 60.0
"""Bound on waits for the bot; generous because a loaded CI machine is slow, not wrong."""


def make_config(
    tmp_path: Path, *, sleep_seconds: float, steps: int = 2, write: bool = False, **tables: Any
) -> Config:
    """A config for a playground: free port, the demo model, short sleeps.

    ``write`` also writes it to ``config.toml``, for a bot in its own process to load.
    """
    data = {
        "playground": {
            "port": 0,
            "demo_sleep_seconds": sleep_seconds,
            "demo_steps": steps,
            "state_file": "playground.json",
        },
        "logging": {"console": False, "json_file": "logs/playground.jsonl"},
        **tables,
    }
    path = tmp_path / "config.toml"
    if write:
        path.write_text(toml(data), encoding="utf-8")
    return parse_config(data, config_path=path, env={})


def toml(tables: dict[str, Any], prefix: str = "") -> str:
    """Nested tables of plain values as TOML (enough for the configs written here)."""
    scalars = {k: v for k, v in tables.items() if not isinstance(v, dict)}
    lines = [f"[{prefix}]"] if prefix and scalars else []
    lines += [f"{key} = {json.dumps(value)}" for key, value in scalars.items()]
    for key, value in tables.items():
        if isinstance(value, dict):
            lines.append(toml(value, f"{prefix}.{key}" if prefix else key))
    return "\n".join(lines) + "\n"


StartPlayground = Callable[..., Any]


@pytest.fixture
async def start_playground(tmp_path: Path) -> AsyncIterator[StartPlayground]:
    """Start a playground (demo model, short sleeps); every one started is stopped after."""
    started: list[Playground] = []

    async def start(
        *, sleep_seconds: float = 1.5, steps: int = 2, bot_process: bool = False, **tables: Any
    ) -> Playground:
        config = make_config(
            tmp_path, sleep_seconds=sleep_seconds, steps=steps, write=bot_process, **tables
        )
        playground = Playground(config, min_edit_interval=0.2, bot_process=bot_process)
        started.append(playground)
        await playground.start()
        return playground

    yield start
    for playground in reversed(started):
        await playground.stop()


async def until(playground: Playground, probe: Callable[[], T | None], what: str) -> T:
    """The first non-None ``probe()``, re-checked on every change to the fake's state."""
    try:
        async with asyncio.timeout(WAIT):
            return await playground.fake.state.changed.wait_for(probe)
    except TimeoutError:
        raise AssertionError(f"timed out after {WAIT}s waiting for {what}") from None


class Page:
    """The playground's JSON API, as the page uses it."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url.rstrip("/")

    async def get(self, path: str) -> Any:
        async with self.session.get(self.url + path) as response:
            assert response.status == 200, await response.text()
            return await response.json()

    async def post(self, path: str, body: dict[str, Any], *, status: int = 200) -> Any:
        async with self.session.post(self.url + path, json=body) as response:
            data = await response.json()
            assert response.status == status, data
            return data


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
