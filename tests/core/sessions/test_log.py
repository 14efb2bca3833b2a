"""SessionLog: durable appends, head and branch rules, bookmarks, queues, turns, snapshots."""

from __future__ import annotations

import pytest

from core.clock import FakeClock
from core.errors import SessionError
from core.sessions import SessionLog, SessionTree
from core.sessions.payloads import ToolCallRecord, UserMessagePayload
from core.sessions.snapshot import QueuedMessage, SessionSnapshot, SteerInterruption
from tests.fixtures.sessions import reply, say, system


@pytest.fixture
async def tree(log: SessionLog) -> SessionTree:
    return await log.load("agent:main:s1")


class TestAppend:
    async def test_first_event_is_a_root_at_seq_1(
        self, log: SessionLog, tree: SessionTree, clock: FakeClock
    ) -> None:
        """The first event has no parent, seq 1, its registered kind and the clock's time."""
        event = await say(log, tree, "hello")
        assert (event.parent_id, event.seq, event.kind) == (None, 1, "user")
        assert event.delivery_mode == "normal"
        assert event.created_at == clock.now()
        assert len(event.node_id) == 32
        assert tree.head_id == event.node_id
        assert tree.last_seq == 1

    async def test_each_event_hangs_off_the_head(self, log: SessionLog, tree: SessionTree) -> None:
        """Parents follow the head and seq counts up by one."""
        first = await say(log, tree, "hello")
        second = await reply(log, tree, "hi")
        third = await say(log, tree, "how are you?")
        assert [e.seq for e in tree.events] == [1, 2, 3]
        assert second.parent_id == first.node_id
        assert third.parent_id == second.node_id
        assert tree.path() == [first, second, third]

    async def test_system_events_do_not_move_the_head(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """A system event's parent is the head, the head stays, and paths skip it."""
        question = await say(log, tree, "hello")
        started = await system(log, tree, "turn_started", turn_id="t1", trigger="normal")
        assert started.parent_id == question.node_id
        assert tree.head_id == question.node_id
        answer = await reply(log, tree, "hi")
        assert answer.parent_id == question.node_id
        assert tree.path() == [question, answer]
        assert tree.children(question.node_id) == [answer]

    async def test_a_payload_model_is_accepted(self, log: SessionLog, tree: SessionTree) -> None:
        """A payload model instance is stored as its JSON dump, defaults included."""
        payload = UserMessagePayload(text="hi", requested_mode="steer")
        event = await log.append(tree, "user_message", payload, delivery_mode="normal")
        assert event.payload == {
            "text": "hi",
            "requested_mode": "steer",
            "author_id": None,
            "queue_item_id": None,
            "author_name": None,
            "attachments": [],
            "inbound_id": None,
        }

    async def test_append_many_keeps_order_in_one_go(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """Skipped tool results then the interruption: advancing ones move the head in order."""
        await say(log, tree, "do two things")
        calls = [ToolCallRecord(id=f"c{i}", name="run", arguments="{}") for i in (1, 2)]
        await reply(log, tree, "", tool_calls=calls)
        events = await log.append_many(
            tree,
            [
                (
                    "tool_result",
                    {"turn_id": "t1", "tool_call_id": "c2", "name": "run", "content": "skipped"}
                    | {"skipped": True},
                    None,
                ),
                (
                    "steer_interruption",
                    {
                        "turn_id": "t1",
                        "step": 1,
                        "skipped_tool_call_ids": ["c2"],
                        "steering_item_ids": ["q1"],
                    },
                    None,
                ),
            ],
        )
        assert [e.seq for e in events] == [3, 4]
        assert events[0].parent_id == tree.path()[-2].node_id
        assert events[1].parent_id == events[0].node_id
        assert tree.head_id == events[0].node_id

    async def test_a_bad_item_records_none_of_the_batch(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """append_many validates everything first: one bad item and nothing is stored."""
        with pytest.raises(SessionError, match="turn_ended"):
            await log.append_many(
                tree,
                [
                    ("turn_started", {"turn_id": "t1", "trigger": "normal"}, None),
                    ("turn_ended", {"turn_id": "t1", "reason": "bored", "steps": 1}, None),
                ],
            )
        assert len(tree) == 0
        assert len(await log.load(tree.session_key)) == 0


class TestValidation:
    async def test_unknown_type_is_rejected(self, log: SessionLog, tree: SessionTree) -> None:
        """An unregistered type fails with a message naming it and how to register it."""
        with pytest.raises(SessionError, match=r"unknown event type 'artifact\.nope'") as err:
            await log.append(tree, "artifact.nope", {})
        assert "register_event_type" in str(err.value)
        assert err.value.ref == "artifact.nope"

    async def test_bad_fields_are_named(self, log: SessionLog, tree: SessionTree) -> None:
        """Missing, mistyped and unexpected fields are all listed."""
        with pytest.raises(SessionError) as err:
            await log.append(tree, "usage", {"turn_id": "t1", "prompt_tokens": "many", "x": 1})
        message = str(err.value)
        assert "prompt_tokens" in message
        assert "completion_tokens" in message
        assert "x: Extra inputs are not permitted" in message

    async def test_user_message_needs_a_delivery_mode(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """A user message without delivery_mode is refused."""
        with pytest.raises(SessionError, match="needs delivery_mode"):
            await log.append(tree, "user_message", {"text": "hi"})

    async def test_other_types_refuse_a_delivery_mode(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """delivery_mode on an assistant message is refused."""
        with pytest.raises(SessionError, match="user messages only"):
            await log.append(tree, "assistant_message", {"turn_id": "t1"}, delivery_mode="steer")

    async def test_structural_types_go_through_their_methods(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """head_moved and bookmark cannot be appended raw; the message names the method."""
        await say(log, tree, "hello")
        with pytest.raises(SessionError, match=r"continue_from\(\)"):
            await log.append(
                tree, "head_moved", {"branch_id": "main", "node_id": None, "from_node_id": None}
            )

    async def test_rejected_appends_store_nothing(self, log: SessionLog, tree: SessionTree) -> None:
        """After refused appends the tree and the store are both still empty."""
        for type_, payload in (("nope", {}), ("user_message", {"txt": "hi"})):
            with pytest.raises(SessionError):
                await log.append(tree, type_, payload, delivery_mode="normal")
        assert len(tree) == 0
        assert await log.session_keys() == []


class TestContinueFrom:
    async def test_from_a_user_message_makes_the_edit_a_sibling(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """The old text comes back, the head is its parent, the next message is its sibling."""
        await say(log, tree, "hello")
        answer = await reply(log, tree, "hi")
        question = await say(log, tree, "what is 2+2?")
        await reply(log, tree, "4")
        old_head = tree.head_id
        assert await log.continue_from(tree, question.node_id) == "what is 2+2?"
        assert tree.head_id == answer.node_id
        edited = await say(log, tree, "what is 2+3?")
        assert edited.parent_id == answer.node_id
        assert tree.children(answer.node_id) == [question, edited]
        assert tree.branches == {"main": old_head, "branch-1": edited.node_id}
        assert tree.active_branch_id == "branch-1"

    async def test_from_another_node_forks_a_branch(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """Leaving the head records branch_created then head_moved; nothing is rewritten."""
        await say(log, tree, "hello")
        answer = await reply(log, tree, "hi")
        await say(log, tree, "more")
        main_head = await reply(log, tree, "sure")
        before = tree.events
        assert await log.continue_from(tree, answer.node_id) is None
        created, moved = tree.events[-2:]
        assert tree.events[: len(before)] == before
        assert (created.type, created.payload) == (
            "branch_created",
            {"branch_id": "branch-1", "from_node_id": answer.node_id},
        )
        assert (moved.type, moved.payload) == (
            "head_moved",
            {
                "branch_id": "branch-1",
                "node_id": answer.node_id,
                "from_node_id": main_head.node_id,
            },
        )
        assert tree.head_id == answer.node_id
        assert tree.branches["main"] == main_head.node_id

    async def test_returning_to_a_branch_head_switches_branch(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """Continuing from an old branch's head activates that branch, with no new branch."""
        first = await say(log, tree, "hello")
        main_head = await reply(log, tree, "hi")
        await log.continue_from(tree, first.node_id)
        side = await say(log, tree, "hey")
        count = len(tree)
        await log.continue_from(tree, main_head.node_id)
        assert [e.type for e in tree.events[count:]] == ["head_moved"]
        assert tree.active_branch_id == "main"
        assert tree.head_id == main_head.node_id
        assert tree.branches == {"main": main_head.node_id, "branch-1": side.node_id}
        assert tree.path() == [first, main_head]

    async def test_from_the_head_records_nothing(self, log: SessionLog, tree: SessionTree) -> None:
        """Continuing from where the session already is writes no event."""
        await say(log, tree, "hello")
        answer = await reply(log, tree, "hi")
        assert await log.continue_from(tree, answer.node_id) is None
        assert len(tree) == 2

    async def test_editing_the_first_message_starts_a_new_root(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """The first message's parent is the start: its edit is a second root."""
        first = await say(log, tree, "helo")
        await reply(log, tree, "hi")
        assert await log.continue_from(tree, first.node_id) == "helo"
        assert tree.head_id is None
        fixed = await say(log, tree, "hello")
        assert fixed.parent_id is None
        assert tree.roots() == [first, fixed]
        assert tree.path() == [fixed]

    async def test_unknown_and_system_refs_are_refused(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """An unknown ref is named in the error; a system event is not a place to continue."""
        await say(log, tree, "hello")
        started = await system(log, tree, "turn_started", turn_id="t1", trigger="normal")
        with pytest.raises(SessionError, match="'nowhere'"):
            await log.continue_from(tree, "nowhere")
        with pytest.raises(SessionError, match="turn_started event"):
            await log.continue_from(tree, started.node_id)


class TestBookmarks:
    async def test_a_bookmark_never_moves_the_head(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """Bookmarking an older node leaves the head and the path as they were."""
        first = await say(log, tree, "hello")
        answer = await reply(log, tree, "hi")
        await log.bookmark(tree, first.node_id, "start")
        assert tree.head_id == answer.node_id
        assert tree.bookmarks == {"start": first.node_id}
        assert tree.events[-1].parent_id == answer.node_id

    async def test_labels_work_wherever_node_ids_do(
        self, log: SessionLog, tree: SessionTree
    ) -> None:
        """resolve, get, children, path and continue_from all accept a label."""
        first = await say(log, tree, "hello")
        answer = await reply(log, tree, "hi")
        await say(log, tree, "more")
        await log.bookmark(tree, answer.node_id, "good answer")
        assert tree.resolve("good answer") == answer.node_id
        assert tree.get("good answer") == answer
        assert tree.path("good answer") == [first, answer]
        assert [e.payload["text"] for e in tree.children("good answer")] == ["more"]
        await log.continue_from(tree, "good answer")
        assert tree.head_id == answer.node_id

    async def test_relabelling_moves_the_label(self, log: SessionLog, tree: SessionTree) -> None:
        """A label is unique per session: bookmarking it again moves it."""
        first = await say(log, tree, "hello")
        answer = await reply(log, tree, "hi")
        await log.bookmark(tree, first.node_id, "mark")
        await log.bookmark(tree, answer.node_id, "mark")
        assert tree.bookmarks == {"mark": answer.node_id}

    async def test_unbookmark(self, log: SessionLog, tree: SessionTree) -> None:
        """Unbookmarking removes the label; an unknown label is an error naming it."""
        first = await say(log, tree, "hello")
        await log.bookmark(tree, first.node_id, "mark")
        await log.unbookmark(tree, "mark")
        assert tree.bookmarks == {}
        with pytest.raises(SessionError, match="no bookmark 'mark'"):
            await log.unbookmark(tree, "mark")
        with pytest.raises(SessionError, match="'mark'"):
            tree.resolve("mark")

    async def test_bad_labels_are_refused(self, log: SessionLog, tree: SessionTree) -> None:
        """Empty labels and labels that look like node ids could not be resolved."""
        first = await say(log, tree, "hello")
        for label in ("  ", first.node_id, "x" * 101):
            with pytest.raises(SessionError, match="not usable"):
                await log.bookmark(tree, first.node_id, label)


class TestQueues:
    async def test_queue_projection(
        self, log: SessionLog, tree: SessionTree, clock: FakeClock
    ) -> None:
        """Queued, delivered, moved at turn end and cleared, as the events say."""
        await say(log, tree, "start")
        await system(log, tree, "turn_started", turn_id="t1", trigger="normal")
        for item, mode in (("s1", "steer"), ("s2", "steer"), ("f1", "follow_up")):
            await system(log, tree, "message_queued", item_id=item, mode=mode, text=item)
        assert [q.item_id for q in tree.steering_queue] == ["s1", "s2"]
        assert tree.follow_up_queue == (
            QueuedMessage(
                item_id="f1", mode="follow_up", text="f1", author_id=None, queued_at=clock.now()
            ),
        )
        await say(log, tree, "s1", mode="steer", queue_item_id="s1")
        assert [q.item_id for q in tree.steering_queue] == ["s2"]
        await system(
            log, tree, "queue_moved", item_ids=["s2"], from_mode="steer", to_mode="follow_up"
        )
        assert tree.steering_queue == ()
        assert [(q.item_id, q.mode) for q in tree.follow_up_queue] == [
            ("f1", "follow_up"),
            ("s2", "follow_up"),
        ]
        await system(log, tree, "queue_cleared", item_ids=["f1"], reason="user")
        assert [q.item_id for q in tree.follow_up_queue] == ["s2"]

    async def test_cancel_drops_what_it_names(self, log: SessionLog, tree: SessionTree) -> None:
        """turn_cancelled stops the turn and removes its dropped items from the queues."""
        await system(log, tree, "turn_started", turn_id="t1", trigger="normal")
        await system(log, tree, "message_queued", item_id="f1", mode="follow_up", text="x")
        await system(log, tree, "turn_cancelled", turn_id="t1", dropped_item_ids=["f1"])
        assert tree.follow_up_queue == ()
        assert tree.running_turn_id is None


class TestTurns:
    async def test_running_turn(self, log: SessionLog, tree: SessionTree) -> None:
        """A turn runs from turn_started until it ends or is interrupted."""
        assert tree.running_turn_id is None
        await system(log, tree, "turn_started", turn_id="t1", trigger="normal")
        assert tree.running_turn_id == "t1"
        await system(log, tree, "turn_ended", turn_id="t1", reason="completed", steps=2)
        assert tree.running_turn_id is None
        await system(log, tree, "turn_started", turn_id="t2", trigger="follow_up")
        await system(log, tree, "turn_interrupted", turn_id="t2")
        assert tree.running_turn_id is None

    async def test_last_interruption(self, log: SessionLog, tree: SessionTree) -> None:
        """A steer interruption is reported until the next turn starts."""
        await system(log, tree, "turn_started", turn_id="t1", trigger="normal")
        await system(
            log,
            tree,
            "steer_interruption",
            turn_id="t1",
            step=2,
            skipped_tool_call_ids=["c3", "c4"],
            steering_item_ids=["s1"],
        )
        assert tree.last_interruption == SteerInterruption(
            turn_id="t1", step=2, skipped_tool_call_ids=("c3", "c4")
        )
        await system(log, tree, "turn_ended", turn_id="t1", reason="completed", steps=3)
        assert tree.snapshot().last_interruption is not None
        await system(log, tree, "turn_started", turn_id="t2", trigger="normal")
        assert tree.last_interruption is None

    async def test_usage_adds_up(self, log: SessionLog, tree: SessionTree) -> None:
        """Usage events are summed; a missing cost counts as zero."""
        await system(log, tree, "usage", turn_id="t1", prompt_tokens=10, completion_tokens=5)
        await system(
            log, tree, "usage", turn_id="t2", prompt_tokens=1, completion_tokens=2, cost_usd=0.5
        )
        usage = tree.total_usage
        assert (usage.prompt_tokens, usage.completion_tokens, usage.cost_usd) == (11, 7, 0.5)


class TestSnapshot:
    async def test_snapshot_contents(
        self, log: SessionLog, tree: SessionTree, clock: FakeClock
    ) -> None:
        """The snapshot carries branch, head, bookmarks, both queues, interruption, turn."""
        first = await say(log, tree, "hello")
        main_head = await reply(log, tree, "hi")
        await log.continue_from(tree, first.node_id)
        edited = await say(log, tree, "hey")
        await log.bookmark(tree, first.node_id, "start")
        await system(log, tree, "turn_started", turn_id="t9", trigger="normal")
        await system(log, tree, "message_queued", item_id="s1", mode="steer", text="stop")
        await system(
            log,
            tree,
            "steer_interruption",
            turn_id="t9",
            step=1,
            skipped_tool_call_ids=[],
            steering_item_ids=["s1"],
        )
        queued = QueuedMessage(
            item_id="s1", mode="steer", text="stop", author_id=None, queued_at=clock.now()
        )
        assert tree.snapshot() == SessionSnapshot(
            session_key="agent:main:s1",
            active_branch_id="branch-1",
            head_node_id=edited.node_id,
            bookmarks={"start": first.node_id},
            steering_queue=(queued,),
            follow_up_queue=(),
            last_interruption=SteerInterruption(turn_id="t9", step=1, skipped_tool_call_ids=()),
            running=True,
            running_turn_id="t9",
            branches={"main": main_head.node_id, "branch-1": edited.node_id},
        )

    async def test_empty_session(self, tree: SessionTree) -> None:
        """A new session is empty, on main, with no head."""
        snapshot = tree.snapshot()
        assert (snapshot.head_node_id, snapshot.active_branch_id) == (None, "main")
        assert snapshot.branches == {"main": None}
        assert not snapshot.running
