"""The transcript over a real store: owed until shown, settled once, forgotten with its thread.

A recording sink stands in for the channel (what a Discord thread would be
made to show). Every test runs on SQLite (both drivers) and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from core.bindings.records import BindingEnded, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.sharding import ShardSet
from core.store import Database
from core.transcript import SentPart, ThreadMessage, Transcript
from tests.fixtures.bindings import conv

SESSION = "agent:transcript"


@dataclass
class Sink:
    """The channel: what it was asked to show; ``refuse`` makes it fail for now."""

    channel: str = "discord"
    account_id: str = "main"
    settled: list[str] = field(default_factory=list)
    refuse: bool = False

    async def settle(
        self, binding: SessionBindingRecord, message: ThreadMessage
    ) -> ThreadMessage | None:
        if self.refuse:
            raise OSError("Discord answered 503")
        self.settled.append(message.key)
        return message.showing((*message.sent, SentPart("501", "webhook")))


async def started(
    database: Database, *, shards: ShardSet | None = None
) -> tuple[Transcript, Sink, SessionBindingRecord]:
    bindings = (
        SessionBindingService(database, clock=FakeClock())
        if shards is None
        else SessionBindingService(database, clock=FakeClock(), shards=shards)
    )
    await bindings.start()
    record = bindings.active_for_conversation(conv("1000", "10", account="main"))
    if record is None:
        record = await bindings.bind(
            SESSION, "session", conv("1000", "10", account="main"), scope="1"
        )
    transcript = Transcript(database, bindings)
    sink = Sink()
    transcript.sinks.register(sink)
    return transcript, sink, record


def message(record: SessionBindingRecord, key: str, **extra: object) -> ThreadMessage:
    return ThreadMessage(
        key=key,
        binding_id=record.binding_id,
        session_key=record.target_session_key,
        turn_id="t1",
        content={"parts": ["hello"], "limit": 2000},
        sent=(SentPart("500", "webhook"),),
        **extra,  # type: ignore[arg-type]
    )


class TestOwedUntilShown:
    async def test_an_owed_message_is_settled_by_the_next_process_once(
        self, database: Database
    ) -> None:
        first, _, record = await started(database)
        await first.owe(message(record, "a"))

        second, sink, _ = await started(database)
        assert await second.settle_owed() == 1
        assert sink.settled == ["a"]
        third, again, _ = await started(database)
        assert await third.settle_owed() == 0
        assert again.settled == []

    async def test_a_message_shown_is_not_settled_again_even_before_its_mark_is_written(
        self, database: Database
    ) -> None:
        transcript, _sink, record = await started(database)
        owed = message(record, "a")
        await transcript.owe(owed)
        transcript.shown(owed)
        assert await transcript.settle_owed() == 0
        assert not transcript.may_owe(record.binding_id)
        assert await transcript.flush() == 1
        later, other, _ = await started(database)
        assert await later.settle_owed() == 0
        assert other.settled == []

    async def test_what_the_content_and_parts_were_comes_back_as_recorded(
        self, database: Database
    ) -> None:
        first, _, record = await started(database)
        owed = message(record, "a", open_calls=("c1",))
        await first.owe(owed)

        second, _, _ = await started(database)
        (found,) = await second.with_open_calls(record.binding_id)
        assert found == owed
        assert found.content == {"parts": ["hello"], "limit": 2000}
        assert found.sent == (SentPart("500", "webhook"),)

    async def test_a_refusal_keeps_it_owed_for_the_next_pass(self, database: Database) -> None:
        transcript, sink, record = await started(database)
        await transcript.owe(message(record, "a"))
        sink.refuse = True
        assert await transcript.settle_owed() == 0
        assert transcript.may_owe(record.binding_id)
        sink.refuse = False
        assert await transcript.settle_owed([record.binding_id]) == 1
        assert not transcript.may_owe(record.binding_id)

    async def test_a_message_held_by_its_presenter_is_left_alone(self, database: Database) -> None:
        transcript, _sink, record = await started(database)
        await transcript.owe(message(record, "a"))
        transcript.hold("a")
        assert await transcript.settle_owed() == 0
        transcript.release("a")
        assert await transcript.settle_owed() == 1


class TestOpenLines:
    async def test_a_shown_message_with_an_open_line_is_kept_until_it_closes(
        self, database: Database
    ) -> None:
        transcript, _, record = await started(database)
        waiting = message(record, "a", open_calls=("c1",))
        await transcript.owe(waiting)
        transcript.shown(waiting)
        await transcript.flush()
        assert [m.key for m in await transcript.with_open_calls(record.binding_id)] == ["a"]

        done = message(record, "a")
        await transcript.owe(done)
        transcript.shown(done)
        await transcript.flush()
        assert await transcript.with_open_calls(record.binding_id) == []

    async def test_a_kept_message_remembers_where_its_parts_are_once_shown(
        self, database: Database
    ) -> None:
        """Recorded before its first part was posted, shown once it was: the row kept for
        its open line names the message, so a later process edits that one."""
        transcript, _, record = await started(database)
        owed = ThreadMessage(
            key="a",
            binding_id=record.binding_id,
            session_key=SESSION,
            turn_id="t1",
            content={"parts": ["x"]},
            open_calls=("c1",),
        )
        await transcript.owe(owed)
        transcript.shown(owed.showing((SentPart("700", "bot"),)))
        await transcript.flush()
        later, _, _ = await started(database)
        (found,) = await later.with_open_calls(record.binding_id)
        assert found.sent == (SentPart("700", "bot"),)
        assert found.shown

    async def test_a_settled_message_is_kept_where_the_channel_found_it(
        self, database: Database
    ) -> None:
        first, _, record = await started(database)
        await first.owe(message(record, "a", open_calls=("c1",)))
        second, _, _ = await started(database)
        assert await second.settle_owed() == 1
        (found,) = await second.with_open_calls(record.binding_id)
        assert found.sent == (SentPart("500", "webhook"), SentPart("501", "webhook"))


class TestEndedThreads:
    async def test_an_ended_bindings_messages_are_forgotten(self, database: Database) -> None:
        transcript, _, record = await started(database)
        await transcript.owe(message(record, "a", open_calls=("c1",)))
        transcript.on_event(BindingEnded(record, "focus-moved"))
        await transcript.flush()
        assert await transcript.with_open_calls(record.binding_id) == []
        assert not transcript.may_owe(record.binding_id)

    async def test_another_shards_thread_is_left_to_its_process(self, database: Database) -> None:
        _, _, record = await started(database)
        first, _, _ = await started(database)
        await first.owe(message(record, "a"))
        # scope "1" is on shard (1 >> 22) % 2 == 0: a process of shard 1 leaves it alone
        other, sink, _ = await started(database, shards=ShardSet.of(2, [1]))
        assert await other.settle_owed() == 0
        assert sink.settled == []


class TestLanding:
    async def test_a_landed_message_is_shown_and_a_settle_meanwhile_leaves_it(
        self, database: Database
    ) -> None:
        """While its presenter lands it, the message is owed but held: a settle in the
        middle leaves it alone; once landed it is shown, and the next process finds
        nothing owed."""
        transcript, sink, record = await started(database)
        owed = message(record, "l1")
        settled_meanwhile: list[int] = []

        async def landing() -> None:
            settled_meanwhile.append(await transcript.settle_owed())

        await transcript.land(owed, landing(), lambda: owed, failed=lambda: False)
        await transcript.flush()
        assert settled_meanwhile == [0]
        assert sink.settled == []
        second, _, _ = await started(database)
        assert await second.settle_owed() == 0

    async def test_a_failed_landing_stays_owed_with_where_its_parts_are_now(
        self, database: Database
    ) -> None:
        transcript, _, record = await started(database)
        owed = message(record, "l2")
        now = owed.showing((*owed.sent, SentPart("502", "webhook")))

        async def landing() -> None:
            return None

        await transcript.land(owed, landing(), lambda: now, failed=lambda: True)
        second, sink, _ = await started(database)
        assert await second.settle_owed() == 1
        assert sink.settled == ["l2"]

    async def test_cancelled_before_it_lands_nothing_is_left_unawaited(
        self, database: Database
    ) -> None:
        """A stop that cancels the landing while the record is written closes the
        landing it never ran (no coroutine left unawaited) and lets the hold go."""
        transcript, _, record = await started(database)
        ran: list[str] = []

        async def landing() -> None:
            ran.append("landed")

        async def cancelled(_message: ThreadMessage) -> None:
            raise asyncio.CancelledError

        transcript.owe = cancelled  # type: ignore[method-assign]
        work = landing()
        owed = message(record, "l3")
        with pytest.raises(asyncio.CancelledError):
            await transcript.land(owed, work, lambda: owed, failed=lambda: False)
        assert ran == []
        assert work.cr_frame is None  # closed, not left to warn
        del transcript.owe  # the store again
        await transcript.owe(owed)
        assert await transcript.settle_owed() == 1  # not held: the hold was let go
