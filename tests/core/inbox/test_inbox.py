"""The inbox over a real store: recorded first, handed over in order, exactly once.

A real runtime with the scripted model stands behind it; the channel is a
small recording fake (what would be a reaction or a reply in Discord). Every
test runs on SQLite (both drivers) and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.agent import Agent, ToolRegistry
from core.attachments import AttachmentStore
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.errors import ProviderError
from core.inbound import InboundRouter
from core.inbox import FileRef, FileUnavailable, Inbox, InboxMessage, Outcome
from core.leases import Leases
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.agents import GatedTools, tools_step
from tests.fixtures.bindings import conv
from tests.fixtures.stores import StoreFactory

SESSION = "agent:inbox"
THREAD = conv("1000", "10")


@dataclass
class Channel:
    """The channel's side: what it was asked to show, and files it serves."""

    channel: str = "discord"
    account_id: str = "main"
    shown: list[tuple[str, Outcome]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    fetched: list[str] = field(default_factory=list)

    async def fetch_file(self, file: FileRef, /) -> bytes:
        self.fetched.append(file.name)
        if file.url not in self.files:
            raise FileUnavailable(file.name, "Discord's file server answered 503")
        return self.files[file.url]

    async def acknowledge(self, message: InboxMessage, outcome: Outcome, /) -> None:
        self.shown.append((message.item_id, outcome))

    def kinds(self) -> list[tuple[str, str]]:
        return [(item, outcome.kind) for item, outcome in self.shown]


@dataclass
class World:
    inbox: Inbox
    runtime: SessionRuntime
    bindings: SessionBindingService
    channel: Channel
    provider: ScriptedProvider
    tools: GatedTools
    clock: FakeClock
    database: Database

    async def agent(self) -> Agent:
        return await self.runtime.get(SESSION)

    async def said(self) -> list[tuple[str, str | None]]:
        """(text, inbound id) of every user message in the log, in order."""
        agent = await self.agent()
        await asyncio.wait_for(agent.wait_idle(), 10)
        return [
            (e.payload["text"], e.payload.get("inbound_id"))
            for e in agent.tree.events
            if e.type == "user_message"
        ]


def message(item: int, text: str | None = None, **extra: object) -> InboxMessage:
    return InboxMessage(
        conversation=THREAD,
        item_id=str(item),
        seq=item,
        text=f"message {item}" if text is None else text,
        author_id="u1",
        author_name="alice",
        **extra,  # type: ignore[arg-type]
    )


async def world(
    database: Database,
    tmp_path: Path,
    steps: list[Step] | Callable[..., Step],
    *,
    leases: Leases | None = None,
    factory_error: Exception | None = None,
) -> World:
    clock = FakeClock()
    bindings = SessionBindingService(database, clock=clock)
    await bindings.start()
    await bindings.bind(SESSION, "session", THREAD, scope="1")
    provider = ScriptedProvider(steps)
    tools = GatedTools()
    broken = {"error": factory_error}

    def build(tree, log, on_crash):  # type: ignore[no-untyped-def]
        if broken["error"] is not None:
            raise broken["error"]
        return Agent(tree, log, provider, ToolRegistry([tools.tool()]), on_crash=on_crash)

    runtime = SessionRuntime(SessionLog(database), build, clock=clock, leases=leases)
    router = InboundRouter(bindings, runtime)
    inbox = Inbox(
        database,
        router,
        bindings,
        attachments=AttachmentStore(tmp_path / "attachments"),
        text_max_bytes=10_000,
        clock=clock,
        fetch_timeout_seconds=30,
        resident=lambda key: runtime.peek(key) is not None,
    )
    channel = Channel()
    inbox.channels.register(channel)
    built = World(inbox, runtime, bindings, channel, provider, tools, clock, database)
    built.broken = broken  # type: ignore[attr-defined]
    return built


def answer(_messages: object) -> Step:
    return Step(text="ok")


class TestReceiving:
    async def test_a_message_is_recorded_then_delivered_once_with_its_id(
        self, database: Database, tmp_path: Path
    ) -> None:
        """The log holds the message with its channel id; a redelivered event is a duplicate."""
        w = await world(database, tmp_path, answer)
        first = await w.inbox.receive(message(101, "hello"))
        assert (first.kind, first.started) == ("delivered", True)
        again = await w.inbox.receive(message(101, "hello"))
        assert again.kind == "duplicate"
        assert await w.said() == [("hello", "101")]
        assert w.channel.kinds() == [("101", "delivered")]

    async def test_a_message_already_in_the_log_is_not_handed_over_again(
        self, database: Database, tmp_path: Path
    ) -> None:
        """A crash after the log took the message but before the inbox marked it: the next
        attempt recognises it by its id and only marks it done."""
        w = await world(database, tmp_path, answer)
        agent = await w.agent()
        submission = await agent.steer("before the crash", inbound_id="102")
        await submission.wait_recorded()
        await agent.wait_idle()
        outcome = await w.inbox.receive(message(102, "before the crash"))
        assert outcome.kind == "duplicate"
        assert await w.said() == [("before the crash", "102")]
        assert await w.inbox.pending_conversations("discord", "main") == []

    async def test_while_a_turn_runs_messages_steer_and_follow_up_in_order(
        self, database: Database, tmp_path: Path
    ) -> None:
        w = await world(database, tmp_path, [tools_step("a"), Step(text="x"), Step(text="y")])
        started = await w.inbox.receive(message(1, "start"))
        await w.tools.wait_started("a")
        steered = await w.inbox.receive(message(2, "go left"))
        queued = await w.inbox.receive(message(3, ">> then write"))
        assert (started.kind, started.started) == ("delivered", True)
        assert (steered.mode, steered.started) == ("steer", False)
        assert (queued.mode, queued.started) == ("follow_up", False)
        w.tools.release("a")
        assert [text for text, _ in await w.said()] == ["start", "go left", "then write"]


class TestFailures:
    async def test_a_failure_is_told_once_and_the_message_stays_queued(
        self, database: Database, tmp_path: Path
    ) -> None:
        """The agent cannot start: the author is told (once); the next message, once the
        agent can start, takes the failed one along first, in order."""
        w = await world(database, tmp_path, answer, factory_error=ProviderError("no model here"))
        failed = await w.inbox.receive(message(1, "first"))
        assert failed.kind == "failed"
        assert failed.tell
        assert "no model here" in (failed.reason or "")
        retried = await w.inbox.deliver(THREAD)
        assert retried["1"].kind == "failed"
        assert not retried["1"].tell  # told already

        w.broken["error"] = None  # type: ignore[attr-defined]
        await w.inbox.receive(message(2, "second"))
        assert [text for text, _ in await w.said()] == ["first", "second"]
        assert [kind for _, kind in w.channel.kinds()] == [
            "failed",
            "failed",
            "delivered",
            "delivered",
        ]

    async def test_messages_behind_a_failed_one_wait_and_are_told_too(
        self, database: Database, tmp_path: Path
    ) -> None:
        w = await world(database, tmp_path, answer, factory_error=ProviderError("down"))
        await w.inbox.receive(message(1))
        second = await w.inbox.receive(message(2))
        assert second.kind == "failed"
        assert second.tell  # its own author had not heard yet
        assert [(i, o.tell) for i, o in w.channel.shown] == [("1", True), ("1", False), ("2", True)]

    async def test_a_session_run_by_another_live_process_queues_the_message(
        self, database: Database, tmp_path: Path
    ) -> None:
        """Busy elsewhere: the message is shown queued and handed over once the other
        process lets the session go."""
        clock = FakeClock()
        other = Leases(database, ttl_seconds=30, owner="other", clock=clock)
        ours = Leases(database, ttl_seconds=30, owner="ours", clock=clock)
        await other.take("session", SESSION)
        w = await world(database, tmp_path, answer, leases=ours)
        busy = await w.inbox.receive(message(1, "are you there"))
        assert (busy.kind, busy.reason) == ("busy", "other")
        assert await w.inbox.retry() == 0  # still theirs

        await other.release("session", SESSION)
        assert await w.inbox.retry() == 1
        assert await w.said() == [("are you there", "1")]

    async def test_an_unbound_conversation_drops_its_messages(
        self, database: Database, tmp_path: Path
    ) -> None:
        w = await world(database, tmp_path, answer)
        (record,) = w.bindings.list_by_session(SESSION)
        w.inbox.hold([THREAD])
        await w.inbox.receive(message(1))
        await w.bindings.unbind(record.binding_id, reason="user-unfocus")
        outcomes = await w.inbox.release(THREAD)
        assert outcomes["1"].kind == "dropped"
        assert await w.inbox.pending_conversations("discord", "main") == []


class TestHolding:
    async def test_held_messages_wait_and_go_in_the_order_written(
        self, database: Database, tmp_path: Path
    ) -> None:
        """A live message arrives during the catch-up; the older ones read back go first."""
        w = await world(database, tmp_path, answer)
        w.inbox.hold([THREAD])
        live = await w.inbox.receive(message(30, "written after the restart"))
        assert live.kind == "held"
        read_back = [
            message(10, "written while down", source="catch_up"),
            message(20, "also while down", source="catch_up"),
            message(30, "written after the restart"),  # known already
        ]
        fresh = await w.inbox.record(read_back)
        assert [m.item_id for m in fresh] == ["10", "20"]
        outcomes = await w.inbox.release(THREAD)
        assert list(outcomes) == ["10", "20", "30"]
        texts = [text for text, _ in await w.said()]
        assert texts == ["written while down", "also while down", "written after the restart"]

    async def test_a_message_a_stopped_process_recorded_is_held_but_no_news(
        self, database: Database, tmp_path: Path
    ) -> None:
        """Handed again by the chat while held (a stop cut it off before it was handed
        over), a message recorded before waits like a new one, but is marked as recorded
        before: a catch-up's "while the bot was offline" count leaves it out."""
        w = await world(database, tmp_path, answer)
        await w.inbox.record([message(7, "recorded, never handed over")])
        w.inbox.hold([THREAD])
        again = await w.inbox.receive(message(7, "recorded, never handed over"))
        new = await w.inbox.receive(message(8, "written while down"))
        assert (again.kind, again.recorded_before) == ("held", True)
        assert (new.kind, new.recorded_before) == ("held", False)
        await w.inbox.release(THREAD)
        texts = [text for text, _ in await w.said()]
        assert texts == ["recorded, never handed over", "written while down"]

    async def test_a_held_conversations_cursor_stands_still(
        self, database: Database, tmp_path: Path
    ) -> None:
        """A message after a downtime says nothing of what was written during it."""
        w = await world(database, tmp_path, answer)
        await w.inbox.receive(message(5))
        w.inbox.seen(THREAD, 6)  # the bot's own answer
        assert await w.inbox.cursors("discord", "main", ["1000"]) == {"1000": 6}
        w.inbox.hold([THREAD])
        await w.inbox.receive(message(9))
        w.inbox.seen(THREAD, 10)
        assert await w.inbox.cursors("discord", "main", ["1000"]) == {"1000": 6}
        await w.inbox.flush_cursors()
        assert await w.inbox.cursors("discord", "main", ["1000"]) == {"1000": 6}
        await w.inbox.advance(THREAD, 10)
        await w.inbox.release(THREAD)
        assert await w.inbox.cursors("discord", "main", ["1000"]) == {"1000": 10}


class TestFiles:
    async def test_a_file_that_cannot_be_downloaded_costs_only_itself(
        self, database: Database, tmp_path: Path
    ) -> None:
        """The words and the other file go through; the model is told the file's name and
        that it could not be read; the author hears why."""
        w = await world(database, tmp_path, answer)
        w.channel.files["cdn/ok.txt"] = b"fine"
        files = (
            FileRef("ok.txt", "cdn/ok.txt", 4, "text/plain"),
            FileRef("lost.txt", "cdn/lost.txt", 4, "text/plain"),
        )
        outcome = await w.inbox.receive(message(1, "read these", files=files))
        assert outcome.kind == "delivered"
        (refused,) = outcome.refused
        assert refused.name == "lost.txt"
        assert "503" in refused.reason
        await w.said()
        sent = w.provider.calls[-1][-1].content or ""
        assert sent.startswith("read these")
        assert '<attachment name="ok.txt">' in sent
        assert "“lost.txt” could not be read" in sent

    async def test_a_download_that_hangs_times_out_on_the_clock(
        self, database: Database, tmp_path: Path
    ) -> None:
        w = await world(database, tmp_path, answer)
        hang = asyncio.Event()

        async def never(file: FileRef, /) -> bytes:
            await hang.wait()
            return b""

        w.channel.fetch_file = never  # type: ignore[method-assign]
        receiving = asyncio.ensure_future(
            w.inbox.receive(message(1, "slow", files=(FileRef("a.txt", "x", 3, None),)))
        )
        await w.clock.wait_for_sleepers()
        await w.clock.advance(30)
        outcome = await asyncio.wait_for(receiving, 10)
        (refused,) = outcome.refused
        assert "no answer within 30 seconds" in refused.reason

    async def test_a_file_refused_by_what_is_announced_is_not_downloaded(
        self, database: Database, tmp_path: Path
    ) -> None:
        w = await world(database, tmp_path, answer)
        outcome = await w.inbox.receive(
            message(1, "", files=(FileRef("tool.zip", "cdn/tool.zip", 4, "application/zip"),))
        )
        assert outcome.kind == "empty"
        assert w.channel.fetched == []
        assert w.provider.calls == []


class TestPositions:
    async def test_a_position_is_none_until_saved_then_the_newest_saved(
        self, database: Database, tmp_path: Path
    ) -> None:
        """An account's stream position reads back as last saved, per channel and account."""
        w = await world(database, tmp_path, answer)
        assert await w.inbox.position("matrix", "main") is None
        await w.inbox.save_position("matrix", "main", "s72_1")
        await w.inbox.save_position("matrix", "main", "s80_4")
        await w.inbox.save_position("matrix", "other", "s3_0")
        assert await w.inbox.position("matrix", "main") == "s80_4"
        assert await w.inbox.position("matrix", "other") == "s3_0"
        assert await w.inbox.position("discord", "main") is None

    async def test_a_position_survives_a_restart(
        self, open_store: StoreFactory, tmp_path: Path
    ) -> None:
        """Saved means durable: a new process on the same store resumes from it."""
        w = await world(await open_store(), tmp_path, answer)
        await w.inbox.save_position("matrix", "main", "s9_9")
        database = await open_store()
        bindings = SessionBindingService(database, clock=w.clock)
        again = Inbox(
            database,
            InboundRouter(bindings, w.runtime),
            bindings,
            attachments=AttachmentStore(tmp_path / "again"),
            text_max_bytes=10_000,
        )
        assert await again.position("matrix", "main") == "s9_9"
