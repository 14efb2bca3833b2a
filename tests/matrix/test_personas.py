"""Personas on Matrix: virtual users of an application service, or the bot's own account.

A homeserver of its own here, with an application service registered (its user
namespace ``@tb_.*``), so a persona's messages come from users of their own; a person's
mautrix client reads who sent them and the name and picture they go by.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from mautrix.client import Client
from mautrix.types import PaginationDirection, RoomID, UserID

from adapters.matrix.ids import room_of
from adapters.matrix.personas import AppService, PersonaVoices, localpart_of
from adapters.matrix.sending import MatrixSender
from adapters.matrix.streaming import MatrixStream
from core.bindings.records import BindingPersona
from core.config import DEFAULT_DISPLAY_NAME
from core.errors import ConfigError
from core.providers.scripted import ScriptedProvider, Step
from core.subagents.service import SpawnRequest
from tests.matrix.bots import WAIT, a_person, room_with, send, services_bot
from tests.matrix.conftest import REQUIRE_SYNAPSE
from tests.matrix.synapse import (
    SERVER_NAME,
    Synapse,
    SynapseUnavailable,
    matrix_client,
    running_synapse,
)

# the smallest PNG there is: one transparent pixel
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def registration(directory: Path) -> Path:
    """The service's registration, as an operator writes it for the homeserver."""
    path = directory / "threadbound-appservice.yaml"
    path.write_text(
        json.dumps(  # YAML is a superset of JSON
            {
                "id": "threadbound",
                "url": None,  # the bot syncs as itself: nothing is pushed to the service
                "as_token": secrets.token_hex(16),
                "hs_token": secrets.token_hex(16),
                "sender_localpart": "tb_service",
                "rate_limited": False,
                "namespaces": {
                    "users": [{"exclusive": True, "regex": f"@tb_.*:{SERVER_NAME}"}],
                    "aliases": [],
                    "rooms": [],
                },
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def service_synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Synapse, Path]]:
    directory = tmp_path_factory.mktemp("synapse-appservice")
    path = registration(directory)
    try:
        with running_synapse(
            directory / "server", extra_config={"app_service_config_files": [str(path)]}
        ) as server:
            yield server, path
    except SynapseUnavailable as exc:
        if REQUIRE_SYNAPSE:
            pytest.fail(f"{exc}; THREADBOUND_REQUIRE_SYNAPSE=1 makes the Matrix tests mandatory")
        pytest.skip(str(exc))


@pytest.fixture
async def avatar_url() -> AsyncIterator[str]:
    """A web address serving a persona's picture, on loopback."""

    async def picture(_request: web.Request) -> web.Response:
        return web.Response(body=PIXEL, content_type="image/png")

    app = web.Application()
    app.router.add_get("/scout.png", picture)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/scout.png"
    finally:
        await runner.cleanup()


async def first_message_from(person: Client, room_id: RoomID, sender: str) -> dict[str, Any]:
    async with asyncio.timeout(WAIT):
        while True:
            page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=50)
            for event in reversed(page.events):
                data = event.serialize()
                if data["type"] == "m.room.message" and data["sender"] == sender:
                    return data
            await person.sync(timeout=2_000)


class TestAppServiceVoices:
    async def test_each_persona_speaks_as_a_user_of_its_own(
        self, service_synapse: tuple[Synapse, Path], avatar_url: str
    ) -> None:
        """Scout and Critic each get a virtual user (made on first use, named and pictured
        as the profile says, in the room); a streamed answer comes from Scout's user,
        without the bot's bold name, and edits stay Scout's."""
        server, path = service_synapse
        service = AppService.load(path)
        async with a_person(server) as person, matrix_client(server, server.bot) as bot:
            room_id = await person.create_room(invitees=[server.bot.user_id])
            await bot.join_room_by_id(room_id)
            voices = PersonaVoices(bot, MatrixSender(bot), server_name=SERVER_NAME, service=service)
            scout = BindingPersona(name="Scout", avatar_url=avatar_url)
            critic = BindingPersona(name="Critic")
            voice = await voices.voice(scout, room_id)
            assert voice.user_id == f"@tb_scout:{SERVER_NAME}"
            assert voice.name is None
            again = await voices.voice(scout, room_id)  # made once
            assert again.sender is voice.sender
            other = await voices.voice(critic, room_id)
            assert other.user_id == f"@tb_critic:{SERVER_NAME}"

            root = await send(person, room_id, "🧵 root")
            stream = MatrixStream(voice.sender, room_id, root, key="p1", name=voice.name)
            stream.append("Looking into it")
            stream.append(", found it.")
            await stream.close()
            assert stream.failure is None

            said = await first_message_from(person, room_id, voice.user_id)
            assert said["content"]["body"].startswith("Looking into it")
            assert "**" not in said["content"]["body"]  # speaks as itself: no name in the text
            profile = await person.get_profile(UserID(voice.user_id))
            assert profile.displayname == "Scout"
            assert str(profile.avatar_url).startswith("mxc://")
            members = await person.get_joined_members(room_id)
            assert {voice.user_id, other.user_id} <= set(members)

    async def test_a_restarted_bot_finds_its_personas_made(
        self, service_synapse: tuple[Synapse, Path]
    ) -> None:
        """A second process (a fresh PersonaVoices) takes up the same user without error."""
        server, path = service_synapse
        service = AppService.load(path)
        async with a_person(server) as person, matrix_client(server, server.bot) as bot:
            room_id = await person.create_room(invitees=[server.bot.user_id])
            await bot.join_room_by_id(room_id)
            persona = BindingPersona(name="Restarted")
            for _ in range(2):
                voices = PersonaVoices(
                    bot, MatrixSender(bot), server_name=SERVER_NAME, service=service
                )
                voice = await voices.voice(persona, room_id)
                await voice.sender.send(room_id, {"msgtype": "m.text", "body": "hi"}, txn=_txn())
            members = await person.get_joined_members(room_id)
            assert voice.user_id in members


class TestAccountPersonas:
    async def test_a_spawned_agent_answers_as_its_own_user(
        self, service_synapse: tuple[Synapse, Path], tmp_path: Path
    ) -> None:
        """With the account's appservice_registration set, a spawned session's answer in
        its thread comes from the persona's virtual user, never from the bot's account,
        and carries no bold name: the sender is the persona."""
        server, path = service_synapse
        provider = ScriptedProvider(lambda _messages: Step(text="All green."))
        async with (
            services_bot(
                server,
                tmp_path,
                provider=provider,
                thread_bindings={"spawnSubagentSessions": True},
                account_settings={"appservice_registration": str(path)},
            ) as bot,
            a_person(server) as person,
        ):
            room_id = await room_with(bot, person)
            async with bot.running() as watched:
                await watched.wait_batches(1)
                spawned = await bot.services.subagents.spawn(
                    SpawnRequest(
                        task="check",
                        thread=True,
                        mode="session",
                        requester=room_of("default", room_id),
                        scope=room_id,
                    )
                )
                assert spawned.binding is not None
                persona = f"@{localpart_of(DEFAULT_DISPLAY_NAME)}:{SERVER_NAME}"
                said = await first_message_from(person, room_id, persona)
        assert said["content"]["body"] == "All green."
        relates = said["content"]["m.relates_to"]
        assert relates["rel_type"] == "m.thread"
        assert relates["event_id"] == spawned.binding.conversation.conversation_id


class TestBotVoice:
    async def test_without_a_service_the_bot_speaks_under_the_persona_name(
        self, synapse: Synapse
    ) -> None:
        async with matrix_client(synapse, synapse.bot) as bot:
            bot_sender = MatrixSender(bot)
            voices = PersonaVoices(bot, bot_sender, server_name=SERVER_NAME)
            voice = await voices.voice(BindingPersona(name="Scout"), "!anywhere:example.org")
            assert voice.sender is bot_sender
            assert voice.name == "Scout"
            assert voice.user_id == synapse.bot.user_id
            assert not voices.virtual


class TestRegistration:
    def test_a_registration_missing_its_token_is_refused_by_name(self, tmp_path: Path) -> None:
        path = tmp_path / "reg.yaml"
        path.write_text("id: threadbound\nsender_localpart: tb_service\n")
        with pytest.raises(ConfigError, match="no as_token"):
            AppService.load(path)

    def test_the_namespace_decides_which_users_are_the_service_s(self, tmp_path: Path) -> None:
        service = AppService.load(registration(tmp_path))
        assert service.owns(f"@tb_scout:{SERVER_NAME}")
        assert not service.owns(f"@scout:{SERVER_NAME}")
        assert service.as_token not in repr(service)

    @pytest.mark.parametrize(
        ("name", "localpart"),
        [("Scout", "tb_scout"), ("Code Reviewer", "tb_code_reviewer"), ("Ünï", "tb_n")],
    )
    def test_localparts(self, name: str, localpart: str) -> None:
        assert localpart_of(name) == localpart

    def test_a_name_without_latin_letters_gets_a_stable_localpart(self) -> None:
        assert localpart_of("斥候") == localpart_of("斥候") != localpart_of("侦察")
        assert localpart_of("斥候").startswith("tb_")


_count = iter(range(1_000_000))


def _txn() -> str:
    return f"persona-test-{secrets.token_hex(4)}-{next(_count)}"
