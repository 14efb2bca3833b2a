"""adapters.matrix.threads against a real Synapse: a binding opens a thread in the room.

Bound through the core's binding service as a spawn binds (no conversation named yet):
the room gets the root message naming the persona and the task, the binding is the
thread on it, and what a person writes in that thread reaches the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mautrix.client import Client

from adapters.matrix.ids import room_of, thread_of
from adapters.matrix.threads import root_text
from core.bindings.records import BindingMetadata, BindingPersona
from core.errors import BindingError
from tests.matrix.bots import WAIT, Bot, a_person, room_with, send, services_bot
from tests.matrix.synapse import Synapse

SESSION = "agent:matrix-threads"
TASK = "look into the logs of last night's deploy"


@pytest.fixture
async def bot(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Bot]:
    async with services_bot(synapse, tmp_path) as running:
        yield running


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


def spawn_metadata() -> BindingMetadata:
    return BindingMetadata(persona=BindingPersona(name="Scout"), task=TASK)


class TestRootText:
    def test_names_the_persona_and_the_task(self) -> None:
        assert root_text("Scout", TASK) == f"🧵 **Scout** — {TASK}"
        assert root_text("Scout", None) == "🧵 **Scout**"

    def test_a_very_long_task_is_cut_with_an_ellipsis(self) -> None:
        shown = root_text("Scout", "x" * 10_000)
        assert len(shown) < 4_100
        assert shown.endswith("…")


class TestOpening:
    async def test_a_binding_opens_a_thread_on_a_root_message(
        self, bot: Bot, person: Client
    ) -> None:
        """The root names the persona and the task; the binding is its thread, and a person's
        message in that thread reaches the session."""
        room_id = await room_with(bot, person)
        async with bot.running() as watched:
            await watched.wait_batches(1)
            record = await bot.services.bindings.bind(
                SESSION,
                "subagent",
                room_of("default", room_id).new_beside(),
                metadata=spawn_metadata(),
                scope=room_id,
            )
            root = record.conversation.conversation_id
            assert record.conversation == thread_of("default", room_id, root)
            shown = await person.get_event(room_id, root)  # as the person's client reads it
            said = await send(person, room_id, "start with the web tier", thread=root)
            agent = await bot.services.runtime.get(SESSION)
            async with asyncio.timeout(WAIT):
                while not agent.tree.holds_inbound(said):
                    await watched.wait_batches(watched.batches + 1)
        assert str(shown.sender) == bot.user.user_id
        assert shown.content.body == f"🧵 **Scout** — {TASK}"

    async def test_a_room_the_bot_is_not_in_is_a_binding_error(
        self, bot: Bot, person: Client
    ) -> None:
        """The homeserver refuses the root: nothing is bound, and the error says what to do."""
        room_id = await person.create_room()  # the bot was never invited
        async with bot.running() as watched:
            await watched.wait_batches(1)
            with pytest.raises(BindingError, match="invite the bot to the room"):
                await bot.services.bindings.bind(
                    SESSION,
                    "subagent",
                    room_of("default", room_id).new_beside(),
                    metadata=spawn_metadata(),
                )
        assert list(bot.services.bindings.live()) == []
