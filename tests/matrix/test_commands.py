"""adapters.matrix.commands against a real Synapse: ``!`` commands answered as replies.

The bot runs over the real services (:mod:`tests.matrix.bots`); a person types commands
with a mautrix client of their own and reads the bot's replies the way their client
would: the events that reply to their command.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from mautrix.client import Client
from mautrix.types import EventID, PaginationDirection, RoomID

from adapters.matrix.commands import INTERRUPTED
from adapters.matrix.config_commands import ADMINS_ONLY
from adapters.matrix.ids import room_of, thread_of
from core.inbox import InboxPress
from core.providers.scripted import ScriptedProvider, Step
from core.subagents.owners import NOT_OWNER
from tests.matrix.bots import (
    WAIT,
    Bot,
    a_person,
    position_of,
    replies_to,
    room_with,
    send,
    services_bot,
)
from tests.matrix.synapse import Synapse, matrix_client

SESSION = "agent:matrix-commands"


@pytest.fixture
async def bot(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Bot]:
    async with services_bot(synapse, tmp_path) as running:
        yield running


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


class TestCommands:
    async def test_help_and_errors_are_replies_to_the_command(
        self, bot: Bot, person: Client
    ) -> None:
        """``!help`` lists the commands with ``!``; an unknown command and a bad option get
        the grammar's one-sentence errors; each answer replies to its command."""
        room_id = await room_with(bot, person)
        async with bot.running() as watched:
            await watched.wait_batches(1)  # its first sync: what came before is history
            asked = await send(person, room_id, "!help")
            unknown = await send(person, room_id, "!nope")
            extra = await send(person, room_id, "!usage now please")
            outside = await send(person, room_id, "!usage")
            (help_reply,) = await replies_to(person, room_id, asked)
            (unknown_reply,) = await replies_to(person, room_id, unknown)
            (extra_reply,) = await replies_to(person, room_id, extra)
            (outside_reply,) = await replies_to(person, room_id, outside)
        assert help_reply["sender"] == bot.user.user_id
        body = help_reply["content"]["body"]
        assert "`!help` — " in body
        assert "`!usage` — This session's tokens, cost and context." in body
        for usage in ("!agents spawn task:", "!steer message:", "!cancel", "!schedule add when:"):
            assert f"`{usage}" in body
        assert "`!config set key:<text> value:<text>`" in body
        assert unknown_reply["content"]["body"] == (
            "no command !nope; known: !agents, !cancel, !config, !followup, !help, !schedule, "
            "!steer, !usage"
        )
        assert (
            extra_reply["content"]["body"]
            == "!usage: don't know what 'now please' is for; use name:value"
        )
        assert outside_reply["content"]["body"] == (
            "This is not a session's thread; use !usage in a subagent's thread."
        )
        assert "rel_type" not in help_reply["content"]["m.relates_to"]  # the main timeline

    async def test_usage_in_a_bound_thread_answers_in_the_thread_once(
        self, bot: Bot, person: Client
    ) -> None:
        """``!usage`` in a session's thread answers there; a restart from an older position
        does not answer it again."""
        room_id = await room_with(bot, person)
        root = await person.send_text(room_id, "🧵 **Scout** — look into the logs")
        await bot.services.bindings.bind(
            SESSION, "session", thread_of("default", room_id, root), scope=room_id
        )
        async with bot.running() as watched:
            await watched.wait_batches(1)
            before = await bot.services.inbox.position("matrix", "default")
            assert before is not None
            asked = await send(person, room_id, "!usage", thread=root)
            (answer,) = await replies_to(person, room_id, asked)
        assert answer["content"]["body"].startswith("**Usage of this session**")
        relates = answer["content"]["m.relates_to"]
        assert (relates["rel_type"], relates["event_id"]) == ("m.thread", root)
        assert await bot.services.inbox.pending_presses("matrix", "default") == []

        await bot.services.inbox.save_position("matrix", "default", before)
        async with bot.running() as watched:  # the homeserver hands the command again
            await watched.wait_batches(1)
        assert len(await replies_to(person, room_id, asked)) == 1

    async def test_a_command_a_stopped_bot_began_is_closed_asking_for_it_again(
        self, bot: Bot, person: Client
    ) -> None:
        """Recorded but never finished (the bot died answering): the next start replies
        once that it was not finished, and does not act on it when it comes again."""
        room_id = await room_with(bot, person)
        await bot.services.inbox.save_position("matrix", "default", await position_of(bot))
        asked = await send(person, room_id, "!help")
        began = InboxPress(
            conversation=room_of("default", room_id),
            item_id=asked,
            seq=1,
            action="command",
            target="!help",
            message_id=room_id,
        )
        assert await bot.services.inbox.record_press(began)
        async with bot.running() as watched:
            await watched.wait_batches(1)  # the command comes again
        (reply,) = await replies_to(person, room_id, asked)
        assert reply["content"]["body"] == INTERRUPTED
        assert await bot.services.inbox.pending_presses("matrix", "default") == []

    async def test_commands_before_the_bot_ever_read_the_room_are_history(
        self, bot: Bot, person: Client
    ) -> None:
        """The first sync's recent history is not answered; what follows it is."""
        room_id = await room_with(bot, person)
        old = await send(person, room_id, "!help")
        async with bot.running() as watched:
            await watched.wait_batches(1)
            new = await send(person, room_id, "!help")
            await replies_to(person, room_id, new)
        assert await replies_to(person, room_id, old, count=0) == []


FLAG = "channels.matrix.threadBindings.spawnSubagentSessions"
STARTED = re.compile(
    r"Started \*\*(?P<name>[^*]+)\*\* in its thread: https://matrix\.to/#/(?P<room>[^/]+)/(?P<root>\S+)"
)


async def answer_to(
    person: Client, room_id: RoomID, text: str, *, thread: str | None = None
) -> str:
    """Send the command ``text`` and return the bot's one reply's words."""
    asked = await send(person, room_id, text, thread=thread)
    (reply,) = await replies_to(person, room_id, asked)
    return str(reply["content"]["body"])


async def shared_room(bot: Bot, owner: Client, other: Client) -> RoomID:
    """A room the owner made (power level 100) with the bot and another person (0) in it."""
    room_id = await owner.create_room(invitees=[bot.user.user_id, other.mxid])
    async with matrix_client(bot.synapse, bot.user) as bot_client:
        await bot_client.join_room_by_id(room_id)
    await other.join_room_by_id(room_id)
    return room_id


async def reactions_on(person: Client, room_id: RoomID, event_id: EventID, count: int) -> list[str]:
    """The annotations on ``event_id`` the person's client sees, once ``count`` are there."""
    since = None
    async with asyncio.timeout(WAIT):
        while True:
            page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=100)
            keys = [
                e.content.relates_to.key
                for e in page.events  # type: ignore[attr-defined]  # NamedTuple(**kw): opaque
                if str(e.type) == "m.reaction" and e.content.relates_to.event_id == event_id
            ]
            if len(keys) >= count:
                return keys
            since = (await person.sync(since=since, timeout=5_000))["next_batch"]


def started(body: str) -> Mapping[str, Any]:
    found = STARTED.fullmatch(body)
    assert found is not None, body
    return {k: unquote(v) for k, v in found.groupdict().items()}


@pytest.fixture
async def working(synapse: Synapse, tmp_path: Path) -> AsyncIterator[tuple[Bot, asyncio.Event]]:
    """A bot whose model keeps working (mid-answer) until the gate is set."""
    gate = asyncio.Event()
    provider = ScriptedProvider(lambda _messages: Step(text="working on it", gate=gate))
    async with services_bot(synapse, tmp_path, provider=provider) as running:
        try:
            yield running, gate
        finally:
            gate.set()


class TestSpawnSteerCancel:
    async def test_an_admin_turns_spawning_on_and_the_owner_steers_and_cancels(
        self, working: tuple[Bot, asyncio.Event], person: Client
    ) -> None:
        """An administrator's ``!config set`` takes the short key as the Matrix flag;
        ``!agents spawn`` then opens a thread on a root message and replies with its link;
        in that thread the owner's ``!steer`` is queued for the running agent, a plain
        message steers (🧭) and ``>>`` queues a follow-up (📥); ``!cancel`` stops it
        and lists what it let go."""
        bot, _gate = working
        room_id = await room_with(bot, person)
        async with bot.running() as watched:
            await watched.wait_batches(1)
            refused = await answer_to(person, room_id, "!agents spawn task:look mode:session")
            turned_on = await answer_to(
                person, room_id, "!config set key:spawnSubagentSessions value:on"
            )
            shown = await answer_to(person, room_id, "!config get key:spawnSubagentSessions")
            spawned = started(
                await answer_to(
                    person, room_id, '!agents spawn task:"look into the logs" mode:session'
                )
            )
            root = spawned["root"]
            steered = await answer_to(person, room_id, "!steer go left", thread=root)
            plain = await send(person, room_id, "and check the disk", thread=root)
            queued = await send(person, room_id, ">> then write it up", thread=root)
            plain_marks = await reactions_on(person, room_id, plain, 1)
            queued_marks = await reactions_on(person, room_id, queued, 1)
            listed = await answer_to(person, room_id, "!agents list")
            cancelled = await answer_to(person, room_id, "!cancel", thread=root)
            again = await answer_to(person, room_id, "!cancel", thread=root)
        assert refused == (
            f"a session-mode subagent in a thread needs the flag {FLAG} to be true; "
            "an admin can turn it on."
        )
        assert turned_on == f"`{FLAG}` set to `on` (was `off`) in this room."
        assert shown.startswith(f"`{FLAG}` = `on`, from a runtime override by `{person.mxid}`")
        assert spawned["room"] == room_id
        root_event = await person.get_event(room_id, EventID(root))
        assert root_event.sender == bot.user.user_id
        assert root_event.content.body == f"🧵 **{spawned['name']}** — look into the logs"
        binding = bot.services.bindings.active_for_conversation(thread_of("default", room_id, root))
        assert binding is not None
        assert steered == "Steering: go left"
        assert plain_marks == ["🧭"]
        assert queued_marks == ["📥"]
        assert f"**{spawned['name']}** `{binding.target_session_key}` running" in listed
        assert "https://matrix.to/#/" in listed
        assert cancelled.startswith("Cancelled. Dropped ")
        assert "- (steer) go left" in cancelled
        assert again == "Nothing is running here."

    async def test_others_are_refused_changing_a_session_or_a_flag(
        self, working: tuple[Bot, asyncio.Event], person: Client, synapse: Synapse
    ) -> None:
        """A room member below the administrators' power level may not ``!config set`` nor
        ``!cancel`` someone else's session; outside a session's thread, ``!cancel`` says
        where it works; a bad option gets the grammar's sentence."""
        bot, _gate = working
        async with a_person(synapse) as other:
            room_id = await shared_room(bot, person, other)
            async with bot.running() as watched:
                await watched.wait_batches(1)
                not_admin = await answer_to(
                    other, room_id, "!config set key:spawnSubagentSessions value:on"
                )
                await answer_to(person, room_id, "!config set key:spawnSubagentSessions value:on")
                bad = await answer_to(person, room_id, "!agents spawn task:look mode:forever")
                root = started(
                    await answer_to(person, room_id, "!agents spawn task:look mode:session")
                )["root"]
                not_owner = await answer_to(other, room_id, "!cancel", thread=root)
                not_here = await answer_to(other, room_id, "!cancel")
                still = bot.services.bindings.active_for_conversation(
                    thread_of("default", room_id, root)
                )
                assert still is not None
                running = bot.services.runtime.peek(still.target_session_key)
        assert not_admin == ADMINS_ONLY
        assert bot.services.overrides.own(room_id) == {FLAG: True}
        assert bad == "mode must be one of run|session, not 'forever'"
        assert not_owner == NOT_OWNER
        assert not_here == "This is not a session's thread; use !cancel in a subagent's thread."
        assert running is not None
        assert running.running


class TestSchedule:
    async def test_add_then_list(self, bot: Bot, person: Client) -> None:
        """``!schedule add`` in a room makes a job owned by the person's Matrix id, in this
        room's scope; ``!schedule list`` shows it with a link to the room."""
        room_id = await room_with(bot, person)
        async with bot.running() as watched:
            await watched.wait_batches(1)
            empty = await answer_to(person, room_id, "!schedule list")
            added = await answer_to(
                person, room_id, '!schedule add when:"in 20m" task:"check the backups" name:backups'
            )
            listed = await answer_to(person, room_id, "!schedule list")
            wrong = await answer_to(person, room_id, '!schedule add when:"someday" task:x')
        assert empty == "No scheduled jobs. `!schedule add` makes one."
        assert added.startswith("⏰ Scheduled “backups”. ")
        (view,) = await bot.services.schedules.list(room_id, person.mxid, admin=False)
        job = view.job
        assert (job.owner_id, job.scope, job.kind) == (person.mxid, room_id, "channel")
        assert job.job_id in added
        assert listed.startswith(f"**backups** `{job.job_id}` ")
        assert "spawns in https://matrix.to/#/" in listed
        assert f"owner `{person.mxid}`" in listed  # the room's creator is an administrator
        assert wrong == (
            '"someday" is not a schedule: use "in 20m", "every 1d", a date-time like '
            '2026-12-24T09:00 or a cron expression like "0 9 * * 1-5".'
        )
