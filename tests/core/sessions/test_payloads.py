"""The event type registry: kinds, payload models, and registering new types."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from core.errors import SessionError
from core.sessions import SessionLog
from core.sessions.payloads import (
    AssistantMessagePayload,
    TurnEndedPayload,
    TurnStartedPayload,
    event_kind,
    event_type_of,
    payload_model,
    register_event_type,
    registered_types,
    validate_payload,
)
from core.store import Database


class _Plan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: list[str]
    origin_node_id: str


class _OtherPlan(_Plan):
    pass


class TestRegistry:
    def test_built_in_types_and_kinds(self) -> None:
        """Every built-in type is registered with its kind."""
        types = registered_types()
        assert types["user_message"] == "user"
        assert types["assistant_message"] == "assistant"
        assert types["tool_result"] == "tool_boundary"
        system = {
            "turn_started", "turn_ended", "turn_cancelled", "turn_interrupted",
            "steer_interruption", "message_queued", "queue_moved", "queue_cleared", "usage",
            "budget_stop", "head_moved", "branch_created", "bookmark", "unbookmark",
        }  # fmt: skip
        assert {t for t, k in types.items() if k == "system"} >= system
        assert payload_model("assistant_message") is AssistantMessagePayload

    def test_defaults_are_stored(self) -> None:
        """The stored payload is the model's dump, defaults filled in."""
        assert validate_payload("assistant_message", {"turn_id": "t"}) == {
            "turn_id": "t",
            "text": "",
            "tool_calls": [],
            "finish_reason": None,
        }

    def test_duplicate_registration(self) -> None:
        """The same registration twice is fine; another model under the name is refused."""
        register_event_type("artifact.test_plan", "system", _Plan)
        register_event_type("artifact.test_plan", "system", _Plan)
        with pytest.raises(SessionError, match="already registered"):
            register_event_type("artifact.test_plan", "system", _OtherPlan)
        with pytest.raises(SessionError, match="already registered"):
            register_event_type("artifact.test_plan", "assistant", _Plan)
        assert event_kind("artifact.test_plan") == "system"

    def test_malformed_names_are_refused(self) -> None:
        """Type names are lower-case dotted words."""
        for name in ("", "Artifact", "a b", "x" * 101, ".x"):
            with pytest.raises(SessionError, match="not a valid name"):
                register_event_type(name, "system", _Plan)

    def test_unknown_type(self) -> None:
        """Looking up an unregistered type names it."""
        with pytest.raises(SessionError, match="unknown event type 'nope'"):
            payload_model("nope")

    async def test_a_registered_type_can_be_appended(self, database: Database) -> None:
        """A type registered later is validated and appended like a built-in."""
        register_event_type("artifact.test_plan", "system", _Plan)
        log = SessionLog(database)
        tree = await log.load("s")
        event = await log.append(
            tree, "artifact.test_plan", {"steps": ["a"], "origin_node_id": "n"}
        )
        assert (event.kind, event.payload["steps"]) == ("system", ["a"])
        with pytest.raises(SessionError, match="origin_node_id"):
            await log.append(tree, "artifact.test_plan", {"steps": []})
        assert await log.load("s") == tree


class TestTypedAppends:
    async def test_a_payload_model_names_its_event_type(self, database: Database) -> None:
        """append takes the typed model alone: the name lives with the shape."""
        log = SessionLog(database)
        tree = await log.load("s")
        event = await log.append(tree, TurnStartedPayload(turn_id="t1", trigger="normal"))
        assert event.type == "turn_started"
        assert event.payload == {"turn_id": "t1", "trigger": "normal"}
        ended = TurnEndedPayload(turn_id="t1", reason="completed", steps=1)
        assert event_type_of(ended) == "turn_ended"

    def test_an_unregistered_model_is_refused(self) -> None:
        class Stray(BaseModel):
            x: int = 0

        with pytest.raises(SessionError, match="Stray is the payload model of no event type"):
            event_type_of(Stray())
