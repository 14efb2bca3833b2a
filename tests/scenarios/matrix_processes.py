"""The scenarios' Matrix with the bot as a process of its own, so it can be killed.

``python -m bot`` runs as in a deployment, Matrix only: one account on the test
homeserver, a SQLite store, and the model server in this process that plays the
scenario's :class:`~tests.scenarios.platform.Model` as the Discord processes' does
(:class:`~tests.scenarios.discord_processes.ScenarioLLM`). ``kill -9`` is a real
crash; the next start is the same command over the same config, store and account.
People and what they read are as for the bot in this process
(:class:`~tests.scenarios.matrix_reading.MatrixReading`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, TypeVar

from mautrix.client import Client
from mautrix.types import RoomID

from tests.fixtures.shard_processes import ROOT, BotProcess
from tests.matrix.bots import a_person
from tests.matrix.synapse import MatrixUser, Synapse
from tests.matrix.test_connection import until_member
from tests.scenarios.discord_processes import ScenarioLLM
from tests.scenarios.matrix_reading import AGENT, MatrixReading
from tests.scenarios.platform import PERSONA, Answer, Model, Shown, Thread

__all__ = ["MatrixProcess"]

TOKEN_ENV: Final = "TB_SCENARIO_MATRIX_TOKEN"
_bots = itertools.count()
T = TypeVar("T")


def config_text(tmp: Path, synapse: Synapse, user: MatrixUser, llm: ScenarioLLM) -> str:
    """The process's TOML: Matrix only, a session's spawn opens a thread, one persona."""
    store = f"sqlite:///{tmp / 'bot.db'}"
    return "\n".join(
        [
            "[store]",
            f"url = {json.dumps(store)}",
            "[channels.matrix.accounts.default]",
            f"homeserver = {json.dumps(synapse.base_url)}",
            f"user_id = {json.dumps(user.user_id)}",
            f'access_token_env = "{TOKEN_ENV}"',
            "[channels.matrix.threadBindings]",
            "spawnSubagentSessions = true",
            "[providers.fake]",
            f"base_url = {json.dumps(llm.base_url)}",
            'model = "m"',
            f"[agents.{AGENT}]",
            f"display_name = {json.dumps(PERSONA)}",
            "",
        ]
    )


class MatrixBotProcess(BotProcess):
    """``python -m bot`` with the Matrix account's token and no Discord token at all."""

    def __init__(self, tmp: Path, config: str, token: str) -> None:
        super().__init__("bot", tmp, config)
        self._token = token

    def token_env(self) -> dict[str, str]:
        return {TOKEN_ENV: self._token}

    async def start(self, since: int = 0) -> None:
        self.since = since
        env = {k: v for k, v in os.environ.items() if k != "DISCORD_TOKEN"}
        env |= {**self.token_env(), "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "--config",
                str(self.config_path),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )


class MatrixProcess(MatrixReading):
    """One bot process on the test homeserver; the owner's room made at its first start."""

    name = "matrix"

    def __init__(
        self,
        synapse: Synapse,
        tmp: Path,
        llm: ScenarioLLM,
        user: MatrixUser,
        owner: Client,
        other: Client,
        model: Model,
    ) -> None:
        self.synapse = synapse
        self.tmp = tmp
        self.llm = llm
        self.user = user
        self.bot_id = user.user_id
        self.owner = owner
        self.other = other
        self.model = model
        self._process: MatrixBotProcess | None = None

    @classmethod
    @asynccontextmanager
    async def running(
        cls, synapse: Synapse, tmp: Path, model: Model
    ) -> AsyncIterator[MatrixProcess]:
        user = synapse.register(f"tb-scenario-process-{next(_bots)}")
        llm = ScenarioLLM(model)
        async with (
            llm,
            a_person(synapse) as owner,
            a_person(synapse) as other,
        ):
            platform = cls(synapse, tmp, llm, user, owner, other, model)
            try:
                yield platform
            finally:
                if platform._process is not None:
                    await platform._process.stop()

    async def start(self, answer: Answer | None = None) -> None:
        if answer is not None:
            self.model.answer = answer
        if self._process is None:
            config = config_text(self.tmp, self.synapse, self.user, self.llm)
            self._process = MatrixBotProcess(self.tmp, config, self.user.access_token)
        await self._process.start()
        if self.room is None:  # the bot is syncing once it took the invitation
            room = await self.open_room()
            await self.watching(until_member(self.owner, room, self.bot_id, "join"))

    async def kill(self) -> None:
        assert self._process is not None, "the scenario has not started the bot"
        await self._process.kill()

    async def session_thread(self, task: str) -> Thread:
        thread = await self.watching(self.spawn(task, mode="session"))
        await self.watching(
            self.until(RoomID(thread.room), lambda events: self.announced(thread, events) or None)
        )
        return thread

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        return await self.watching(super().read_until(thread, done))

    async def watching(self, waited: Awaitable[T]) -> T:
        """What ``waited`` gives; when it times out, a failure with the process's output
        (it may have died)."""
        try:
            return await waited
        except TimeoutError:
            said = self._process.output()[-3000:] if self._process is not None else ""
            raise AssertionError(f"the bot process never got there:\n{said}") from None
