"""``python -m bot`` with only Matrix accounts, as a process against a real Synapse.

It runs only Matrix (no Discord client, no playground), answers a ``!`` command in a
room it was invited to, and stops cleanly on SIGTERM (exit 0). A Matrix account whose
token variable is unset stops the start with one line naming the variable (exit 2).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mautrix.client import Client

from tests.matrix.bots import a_person, replies_to, send
from tests.matrix.synapse import MatrixUser, Synapse
from tests.matrix.test_connection import until_member

ROOT = Path(__file__).resolve().parents[2]
TOKEN_ENV = "TB_TEST_MATRIX_TOKEN"
STOP_WAIT = 60.0


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


def write_config(tmp_path: Path, homeserver: str, user_id: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[store]
url = "sqlite:///{tmp_path / "bot.db"}"

[logging]
json_file = "bot.log.jsonl"

[channels.matrix.accounts.default]
homeserver = "{homeserver}"
user_id = "{user_id}"
access_token_env = "{TOKEN_ENV}"
""",
        encoding="utf-8",
    )
    return path


def bot_env(**extra: str) -> dict[str, str]:
    """The environment without any Discord or Matrix token of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISCORD_TOKEN", TOKEN_ENV)}
    return {**env, **extra}


class TestBotProcess:
    async def test_matrix_only_answers_help_and_stops_on_sigterm(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        user: MatrixUser = synapse.register("tb-process-bot")
        config = write_config(tmp_path, synapse.base_url, user.user_id)
        with (tmp_path / "bot.out").open("wb") as output:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "--config",
                str(config),
                cwd=ROOT,
                env=bot_env(**{TOKEN_ENV: user.access_token}),
                stdout=output,
                stderr=subprocess.STDOUT,
            )
            try:
                room_id = await person.create_room(invitees=[user.user_id])
                await until_member(person, room_id, user.user_id, "join")  # took the invitation
                command = await send(person, room_id, "!help")
                (answer,) = await replies_to(person, room_id, command)
                assert answer["sender"] == user.user_id
                assert answer["content"]["body"].startswith("**In a session's thread**")
                process.send_signal(signal.SIGTERM)
                async with asyncio.timeout(STOP_WAIT):
                    status = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        said = (tmp_path / "bot.out").read_text(errors="replace")
        assert status == 0, said
        assert "playground" not in said
        assert user.access_token not in said
        logged = (tmp_path / "bot.log.jsonl").read_text()
        assert user.access_token not in logged
        assert '"matrix_accounts": ["default"]' in logged
        assert '"event": "bot.stopped"' in logged

    def test_an_unset_token_variable_stops_the_start_naming_it(self, tmp_path: Path) -> None:
        config = write_config(tmp_path, "http://127.0.0.1:9", "@tb:example.org")
        done = subprocess.run(
            [sys.executable, "-m", "bot", "--config", str(config)],
            cwd=ROOT,
            env=bot_env(),
            capture_output=True,
            text=True,
            timeout=STOP_WAIT,
            check=False,
        )
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1
        assert TOKEN_ENV in lines[0]
        assert "Traceback" not in done.stderr
