"""The ``platform`` fixture: one scenario, run on Discord and on Matrix.

Each scenario says on which platforms it runs with :func:`on_both`; the platform's
bot, people and rooms are made only for the platform a test runs on (a Discord run
never starts Synapse, a Matrix run never starts the fake Discord).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from fakediscord import FakeDiscord
from tests.e2e.conftest import StartBot, World, clients, fake, start_bot, world
from tests.matrix.conftest import synapse
from tests.matrix.synapse import Synapse
from tests.scenarios.discord import DiscordPlatform
from tests.scenarios.discord_processes import DiscordProcesses
from tests.scenarios.matrix import MatrixPlatform
from tests.scenarios.matrix_processes import MatrixProcess
from tests.scenarios.platform import Crashable, Missing, Model, Platform

__all__ = ["clients", "crashable", "fake", "on_both", "platform", "start_bot", "synapse", "world"]

F = TypeVar("F", bound=Callable[..., Any])


def on_both(*, matrix_missing: str | None = None, fixture: str = "platform") -> Callable[[F], F]:
    """Run the scenario on Discord and on Matrix (its ``fixture``: ``platform``, or
    ``crashable`` for a bot that can be killed); ``matrix_missing`` names what the Matrix
    side cannot do yet, making its run an expected failure (strict: it must fail, and
    with :class:`Missing`, so the day it works it fails loudly until the mark goes)."""
    marks = (
        [pytest.mark.xfail(strict=True, raises=Missing, reason=matrix_missing)]
        if matrix_missing
        else []
    )
    return pytest.mark.parametrize(
        fixture,
        [pytest.param("discord", id="discord"), pytest.param("matrix", marks=marks, id="matrix")],
        indirect=True,
    )


@pytest.fixture
def platform(request: pytest.FixtureRequest) -> Platform:
    """The platform the test runs on (its parameter), set up only for that one."""
    chosen: Platform = request.getfixturevalue(f"{request.param}_platform")
    return chosen


@pytest.fixture
def crashable(request: pytest.FixtureRequest) -> Crashable:
    """The platform the test runs on, its bot a process of its own."""
    chosen: Crashable = request.getfixturevalue(f"{request.param}_crashable")
    return chosen


@pytest.fixture
def discord_platform(start_bot: StartBot, fake: FakeDiscord, world: World) -> DiscordPlatform:
    return DiscordPlatform(start_bot, fake, world, Model())


@pytest.fixture
async def matrix_platform(synapse: Synapse, tmp_path: Path) -> AsyncIterator[MatrixPlatform]:
    async with MatrixPlatform.running(synapse, tmp_path, Model()) as matrix:
        yield matrix


@pytest.fixture
async def discord_crashable(tmp_path: Path) -> AsyncIterator[DiscordProcesses]:
    async with DiscordProcesses.running(tmp_path, Model()) as discord:
        yield discord


@pytest.fixture
async def matrix_crashable(synapse: Synapse, tmp_path: Path) -> AsyncIterator[MatrixProcess]:
    async with MatrixProcess.running(synapse, tmp_path, Model()) as matrix:
        yield matrix
