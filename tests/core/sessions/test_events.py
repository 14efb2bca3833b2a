"""SessionEvent.data: the payload as its model, parsed on first read, never an error."""

from __future__ import annotations

from core.sessions import EventKind, SessionEvent, SessionTree
from core.sessions.payloads import (
    AssistantMessagePayload,
    ToolCallRecord,
    TurnEndedPayload,
    UnknownPayload,
    UserMessagePayload,
)
from tests.fixtures.sessions import T0, build, build_reply, build_user


def _raw(
    tree: SessionTree, type_: str, payload: dict[str, object], kind: EventKind = "system"
) -> SessionEvent:
    """An event as a store may hold it: its payload never checked against this version."""
    event = SessionEvent(
        session_key=tree.session_key,
        node_id=f"n{tree.last_seq + 1}",
        parent_id=tree.head_id,
        seq=tree.last_seq + 1,
        kind=kind,
        type=type_,
        payload=payload,
        created_at=T0,
    )
    tree.apply(event)
    return event


class TestData:
    def test_the_payload_as_its_model(self) -> None:
        """Each type's payload comes back as the model registered for it, nested models too."""
        tree = SessionTree("s")
        said = build_user(tree, "hello")
        called = build(
            tree,
            "assistant_message",
            {"turn_id": "t1", "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]},
        )
        assert said.data == UserMessagePayload(text="hello")
        assert isinstance(called.data, AssistantMessagePayload)
        assert called.data.tool_calls == [ToolCallRecord(id="c1", name="ls", arguments="{}")]

    def test_read_once_then_kept(self) -> None:
        """The second read is the same object: a reader parses each event once."""
        event = build_user(SessionTree("s"), "hello")
        assert event.data is event.data

    def test_match_on_it(self) -> None:
        """``match`` picks the case by model and fields."""
        tree = SessionTree("s")
        build(tree, "turn_ended", {"turn_id": "t1", "reason": "max_steps", "steps": 7})
        build(tree, "turn_ended", {"turn_id": "t2", "reason": "completed", "steps": 1})

        def said(event: SessionEvent) -> str:
            match event.data:
                case TurnEndedPayload(reason="completed", turn_id=turn_id):
                    return f"{turn_id} done"
                case TurnEndedPayload(steps=steps):
                    return f"stopped after {steps}"
            return "other"

        assert [said(e) for e in tree.events] == ["stopped after 7", "t2 done"]

    def test_a_copy_with_another_payload_reads_its_own(self) -> None:
        """model_copy copies the instance's dict; the copy's data is still its own payload."""
        event = build_user(SessionTree("s"), "before")
        assert isinstance(event.data, UserMessagePayload)
        copy = event.model_copy(update={"payload": {**event.payload, "text": "after"}})
        assert copy.data == UserMessagePayload(text="after")
        assert event.data == UserMessagePayload(text="before")

    def test_reading_data_leaves_equality_and_dumps_alone(self) -> None:
        """An event whose data was read equals its twin and dumps the same fields."""
        event = build_user(SessionTree("s"), "hello")
        twin = SessionEvent.model_validate_json(event.model_dump_json())
        assert isinstance(event.data, UserMessagePayload)
        assert event == twin
        assert twin == event
        assert event.model_dump() == twin.model_dump()
        assert set(event.model_dump()) == set(SessionEvent.model_fields)


class TestUnreadable:
    def test_a_type_nothing_registered(self) -> None:
        """A plugin's event whose plugin is gone: an UnknownPayload naming the type; the
        stored payload stays as it was."""
        event = _raw(SessionTree("s"), "plugin.gone", {"x": 1})
        assert event.data == UnknownPayload(
            type="plugin.gone", reason="no payload model is registered for 'plugin.gone'"
        )
        assert event.payload == {"x": 1}

    def test_a_payload_that_no_longer_fits(self) -> None:
        """A row missing a field its model now requires: an UnknownPayload saying which."""
        event = _raw(SessionTree("s"), "turn_ended", {"turn_id": "t1", "steps": 2})
        assert event.data == UnknownPayload(
            type="turn_ended",
            reason="the payload does not fit TurnEndedPayload: reason: Field required",
        )

    def test_keys_a_later_version_dropped_are_ignored(self) -> None:
        """Extra keys, at the top or nested, do not hide the rest of the payload."""
        tree = SessionTree("s")
        event = _raw(
            tree,
            "assistant_message",
            {
                "turn_id": "t1",
                "text": "hi",
                "mood": "fine",
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}", "index": 0}],
            },
            kind="assistant",
        )
        assert event.data == AssistantMessagePayload(
            turn_id="t1", text="hi", tool_calls=[ToolCallRecord(id="c1", name="ls", arguments="{}")]
        )

    def test_a_match_passes_it_by(self) -> None:
        """A reader matching on models meets an unreadable event as one it does not handle."""
        tree = SessionTree("s")
        _raw(tree, "plugin.gone", {"x": 1})
        _raw(tree, "turn_ended", {"turn_id": "t1"})
        ended = [e for e in tree.events if isinstance(e.data, TurnEndedPayload)]
        assert ended == []


class TestDataAs:
    def test_the_model_or_none(self) -> None:
        tree = SessionTree("s")
        said = build_user(tree, "hello")
        assert said.data_as(UserMessagePayload) == UserMessagePayload(text="hello")
        assert said.data_as(TurnEndedPayload) is None

    def test_other_types_are_not_parsed(self) -> None:
        """Asking an event of another type parses nothing: a scan over a whole log reads
        only the events of the type it looks for."""
        tree = SessionTree("s")
        said = build_user(tree, "hello")
        reply = build_reply(tree, "hi")
        assert said.data_as(AssistantMessagePayload) is None
        assert reply.data_as(UserMessagePayload) is None
        assert "_typed_payload" not in said.__dict__
        assert "_typed_payload" not in reply.__dict__

    def test_unreadable_is_none(self) -> None:
        tree = SessionTree("s")
        event = _raw(tree, "turn_ended", {"turn_id": "t1"})
        assert event.data_as(TurnEndedPayload) is None
        assert _raw(tree, "plugin.gone", {}).data_as(UnknownPayload) is None
