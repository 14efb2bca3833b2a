"""adapters.matrix.connection against a real Synapse: log in, sync, join the rooms it may serve.

Each test registers a bot account of its own, so a pending invitation or a rate limit
of one test never reaches another. What the bot did is read back as a person's client
sees it: the owner long-polls ``/sync`` until the bot's membership shows.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from mautrix.client import Client
from mautrix.types import RoomCreatePreset, RoomID, SyncToken
from structlog.testing import capture_logs

from adapters.matrix import MatrixConnection, MatrixLoginError
from core.config import Config, parse_config
from tests.matrix.synapse import MatrixUser, Synapse, matrix_client

WAIT = 30.0  # seconds: a loaded machine; a sync answers within milliseconds of a change
TOKEN_ENV = "MATRIX_ACCESS_TOKEN"
_bots = itertools.count()


@pytest.fixture
def bot(synapse: Synapse) -> MatrixUser:
    """A bot account of this test's own."""
    return synapse.register(f"tb-bot-{next(_bots)}")


def matrix_config(synapse: Synapse, user: MatrixUser, **account: Any) -> Config:
    """A config with one Matrix account ``default`` for ``user``, its token in the env."""
    table = {
        "homeserver": synapse.base_url,
        "user_id": user.user_id,
        "access_token_env": TOKEN_ENV,
        **account,
    }
    data = {"channels": {"matrix": {"accounts": {"default": table}}}}
    return parse_config(data, env={TOKEN_ENV: user.access_token})


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[MatrixConnection]:
    """The account's connection running in the background; cancelled on the way out."""
    async with aiohttp.ClientSession() as session:
        connection = MatrixConnection.from_config(config, "default", session=session)
        task = asyncio.create_task(connection.run())
        try:
            yield connection
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


async def until_member(person: Client, room_id: RoomID, user_id: str, membership: str) -> None:
    """Long-poll the person's ``/sync`` until ``user_id`` has ``membership`` in ``room_id``."""
    since: SyncToken | None = None
    async with asyncio.timeout(WAIT):
        while True:
            data = await person.sync(since=since, timeout=5_000)
            room = (data.get("rooms") or {}).get("join", {}).get(room_id, {})
            events = (room.get("state") or {}).get("events", []) + (room.get("timeline") or {}).get(
                "events", []
            )
            for event in events:
                if (
                    event.get("type") == "m.room.member"
                    and event.get("state_key") == user_id
                    and event.get("content", {}).get("membership") == membership
                ):
                    return
            since = data["next_batch"]


class TestJoining:
    async def test_joins_a_room_it_is_invited_to(self, synapse: Synapse, bot: MatrixUser) -> None:
        """Invited by a person, the bot joins; the person's client sees it in the room."""
        async with matrix_client(synapse, synapse.owner) as owner:
            with capture_logs() as logs:
                async with running(matrix_config(synapse, bot)) as connection:
                    room_id = await owner.create_room(invitees=[bot.user_id])
                    await until_member(owner, room_id, bot.user_id, "join")
            assert room_id in connection.joined_rooms
            assert bot.user_id in await owner.get_joined_members(room_id)
        joined = [e for e in logs if e["event"] == "matrix.room_joined"]
        assert [(e["room_id"], e["via"]) for e in joined] == [(room_id, "invite")]
        connected = [e for e in logs if e["event"] == "matrix.connected"]
        assert [e["user_id"] for e in connected] == [bot.user_id]

    async def test_with_rooms_only_those_rooms(self, synapse: Synapse, bot: MatrixUser) -> None:
        """With ``rooms`` set, an invitation elsewhere is left pending; a listed room is joined."""
        async with matrix_client(synapse, synapse.owner) as owner, aiohttp.ClientSession() as http:
            elsewhere = await owner.create_room(invitees=[bot.user_id])
            listed = await owner.create_room(invitees=[bot.user_id])
            config = matrix_config(synapse, bot, rooms=[listed])
            connection = MatrixConnection.from_config(config, "default", session=http)
            with capture_logs() as logs:
                await connection.login()
                await connection.sync_once()  # the first sync: both invitations at once
            assert connection.joined_rooms == {listed}
            await until_member(owner, listed, bot.user_id, "join")
            assert bot.user_id not in await owner.get_joined_members(elsewhere)
        ignored = [e for e in logs if e["event"] == "matrix.invite_ignored"]
        assert [(e["room_id"], e["inviter"]) for e in ignored] == [
            (elsewhere, synapse.owner.user_id)
        ]

    async def test_joins_a_listed_public_room_at_start(
        self, synapse: Synapse, bot: MatrixUser
    ) -> None:
        """A listed room the bot can join without an invitation is joined when it starts."""
        async with matrix_client(synapse, synapse.owner) as owner:
            room_id = await owner.create_room(preset=RoomCreatePreset.PUBLIC)
            async with running(matrix_config(synapse, bot, rooms=[room_id])) as connection:
                await until_member(owner, room_id, bot.user_id, "join")
            assert room_id in connection.joined_rooms

    async def test_a_refused_join_is_logged_and_the_bot_goes_on(
        self, synapse: Synapse, bot: MatrixUser
    ) -> None:
        """A listed private room it was not invited to is a warning, not the end of the bot."""
        async with matrix_client(synapse, synapse.owner) as owner:
            private = await owner.create_room()
            invited = await owner.create_room(invitees=[bot.user_id])
            config = matrix_config(synapse, bot, rooms=[private, invited])
            with capture_logs() as logs:
                async with running(config) as connection:
                    await until_member(owner, invited, bot.user_id, "join")
            assert connection.joined_rooms == {invited}
        failed = [e for e in logs if e["event"] == "matrix.join_failed"]
        assert [e["room_id"] for e in failed] == [private]
        assert "M_FORBIDDEN" in failed[0]["error"]


async def run_until_it_ends(config: Config) -> None:
    """Run the account's connection in the foreground until it raises (or WAIT passes)."""
    async with aiohttp.ClientSession() as session, asyncio.timeout(WAIT):
        await MatrixConnection.from_config(config, "default", session=session).run()


class TestLogin:
    async def test_a_refused_token_names_its_variable_not_its_value(self, synapse: Synapse) -> None:
        """A token the homeserver does not know ends run() with MatrixLoginError."""
        wrong = MatrixUser(synapse.other.user_id, "syt_bm9ib2R5_NotARealTokenAtAll_0abcde", "X")
        with capture_logs() as logs, pytest.raises(MatrixLoginError) as err:
            await run_until_it_ends(matrix_config(synapse, wrong))
        assert TOKEN_ENV in str(err.value)
        assert "M_UNKNOWN_TOKEN" in str(err.value)
        assert wrong.access_token not in str(err.value)
        assert wrong.access_token not in repr(logs)

    async def test_another_users_token_is_refused(self, synapse: Synapse, bot: MatrixUser) -> None:
        """The token must be the configured user's own: whoami is checked."""
        impostor = MatrixUser(bot.user_id, synapse.other.access_token, synapse.other.device_id)
        with pytest.raises(MatrixLoginError, match=r"belongs to @someone:example\.org"):
            await run_until_it_ends(matrix_config(synapse, impostor))
