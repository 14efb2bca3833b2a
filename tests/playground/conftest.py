"""Fixtures: a playground running in-process (fake Discord + bot + web page) with the demo model."""

from __future__ import annotations

import asyncio
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


def make_config(tmp_path: Path, *, sleep_seconds: float, steps: int = 2, **tables: Any) -> Config:
    """A config for an in-process playground: free port, the demo model, short sleeps."""
    return parse_config(
        {
            "playground": {
                "port": 0,
                "demo_sleep_seconds": sleep_seconds,
                "demo_steps": steps,
                "state_file": "playground.json",
            },
            "logging": {"console": False, "json_file": "logs/playground.jsonl"},
            **tables,
        },
        config_path=tmp_path / "config.toml",
        env={},
    )


StartPlayground = Callable[..., Any]


@pytest.fixture
async def start_playground(tmp_path: Path) -> AsyncIterator[StartPlayground]:
    """Start a playground (demo model, short sleeps); every one started is stopped after."""
    started: list[Playground] = []

    async def start(*, sleep_seconds: float = 1.5, steps: int = 2, **tables: Any) -> Playground:
        config = make_config(tmp_path, sleep_seconds=sleep_seconds, steps=steps, **tables)
        playground = Playground(config, min_edit_interval=0.2)
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
