"""The test homeserver itself: real accounts, real rooms, real messages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from mautrix.types import MessageType, PaginationDirection, TextMessageEventContent

from tests.matrix.synapse import (
    Synapse,
    SynapseUnavailable,
    homeserver_config,
    matrix_client,
    running_synapse,
)


class TestHomeserverConfig:
    def test_loopback_only_and_rate_limits_as_shipped(self, tmp_path: Path) -> None:
        """The server listens on 127.0.0.1 alone, federates with nobody, keeps default limits."""
        config = homeserver_config(tmp_path, 8008, "secret")
        assert [listener["bind_addresses"] for listener in config["listeners"]] == [["127.0.0.1"]]
        assert config["federation_domain_whitelist"] == []
        assert config["trusted_key_servers"] == []
        assert config["report_stats"] is False
        assert not [key for key in config if key.startswith("rc_")]


class TestSynapse:
    async def test_bot_joins_an_invited_room_and_the_owner_reads_its_message(
        self, synapse: Synapse
    ) -> None:
        """A person invites the bot; the bot joins and speaks; the person reads it back."""
        async with (
            matrix_client(synapse, synapse.owner) as owner,
            matrix_client(synapse, synapse.bot) as bot,
        ):
            room_id = await owner.create_room(name="groundwork", invitees=[synapse.bot.user_id])
            assert room_id in [room for room in (await bot.sync(timeout=0))["rooms"]["invite"]]
            await bot.join_room_by_id(room_id)
            event_id = await bot.send_text(room_id, "hello from threadbound")

            page = await owner.get_messages(
                room_id, direction=PaginationDirection.BACKWARD, limit=20
            )
            said = [
                event
                for event in page.events
                if event.sender == synapse.bot.user_id
                and isinstance(event.content, TextMessageEventContent)
            ]
            assert [(e.event_id, e.content.msgtype, e.content.body) for e in said] == [
                (event_id, MessageType.TEXT, "hello from threadbound")
            ]

    async def test_accounts_are_who_they_say(self, synapse: Synapse) -> None:
        """Each registered token logs in as its own user id, on the test server's name."""
        for user in (synapse.bot, synapse.owner, synapse.other):
            async with matrix_client(synapse, user) as client:
                assert (await client.whoami()).user_id == user.user_id
            assert user.user_id.endswith(f":{synapse.server_name}")
        assert synapse.owner.access_token not in repr(synapse)


class TestRunningSynapse:
    def test_a_server_that_cannot_start_says_why_and_where_its_log_is(self, tmp_path: Path) -> None:
        """A config Synapse rejects ends in SynapseUnavailable naming the exit and the log."""
        if importlib.util.find_spec("synapse") is None:
            pytest.skip("matrix-synapse is not installed")
        broken = {"database": {"name": "no-such-engine", "args": {}}}
        with (
            pytest.raises(SynapseUnavailable, match=r"exited with code \d+.*homeserver\.log"),
            running_synapse(tmp_path, extra_config=broken),
        ):
            pytest.fail("Synapse started with a broken config")
