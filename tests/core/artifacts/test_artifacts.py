"""Artifacts: the registry, the model's path, the confirmed path, and persistence."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from pydantic import BaseModel

import core.artifacts.builtin as builtin
from core.agent import ToolContext, ToolRegistry
from core.agent.builtin_tools import emit_artifact_tool
from core.artifacts import (
    ArtifactService,
    artifact_tool_handler,
    artifact_type,
    register_artifact_type,
)
from core.errors import ArtifactError, SessionError
from core.providers.types import ToolCall
from core.sessions import SessionEvent, SessionLog, SessionTree
from core.sessions.payloads import event_kind
from core.store import Database
from tests.fixtures.sessions import reply, say

KEY = "agent:main:artifacts"
NOTE_AND_BRIEF = ("note", "brief")


@pytest.fixture
def log(db: Database) -> SessionLog:
    return SessionLog(db)


@pytest.fixture
def service(log: SessionLog) -> ArtifactService:
    return ArtifactService(log)


@pytest.fixture
async def tree(log: SessionLog) -> SessionTree:
    return await log.load(KEY)


@pytest.fixture
async def nodes(log: SessionLog, tree: SessionTree) -> list[str]:
    first = await say(log, tree, "plan a trip")
    second = await reply(log, tree, "where to?")
    return [first.node_id, second.node_id]


async def _note(
    service: ArtifactService, tree: SessionTree, origin: list[str], **overrides: Any
) -> SessionEvent:
    fields: dict[str, Any] = {
        "type": "note",
        "data": {"text": "wants the sea"},
        "origin": origin,
        "agent": "planner",
        "allowed_types": NOTE_AND_BRIEF,
    }
    fields.update(overrides)
    return await service.emit_from_model(tree, **fields)


class TestRegistry:
    def test_builtin_types_are_system_events(self) -> None:
        """``brief`` is system-only, ``note`` is not; both are ``system`` session events."""
        brief, note = artifact_type("brief"), artifact_type("note")
        assert brief is not None
        assert brief.system_only
        assert note is not None
        assert not note.system_only
        assert event_kind("artifact.brief") == event_kind("artifact.note") == "system"

    def test_registration_is_idempotent_on_reimport(self) -> None:
        """Reloading the module that registers the built-ins changes nothing."""
        before = artifact_type("brief")
        importlib.reload(builtin)
        after = artifact_type("brief")
        assert before is not None
        assert after is not None
        assert after.payload_model is before.payload_model
        assert after.system_only

    def test_registering_a_name_again_differently_is_refused(self) -> None:
        """Another schema or another system_only for a taken name is a clash."""

        class Other(BaseModel):
            body: str

        with pytest.raises(ArtifactError, match=r"'note'.*already registered"):
            register_artifact_type("note", Other)
        with pytest.raises(ArtifactError, match="already registered"):
            register_artifact_type("note", builtin.NoteData, system_only=True)

    def test_a_malformed_name_is_refused(self) -> None:
        class Data(BaseModel):
            x: int

        with pytest.raises(ArtifactError, match="'Bad Name'"):
            register_artifact_type("Bad Name", Data)


class TestEmitFromModel:
    async def test_valid_note_is_stored_with_its_origin(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        """A model note becomes an ``artifact.note`` system event that does not move the head."""
        head = tree.head_id
        event = await _note(service, tree, nodes)
        assert (event.type, event.kind) == ("artifact.note", "system")
        assert event.payload["type"] == "note"
        assert event.payload["data"] == {"text": "wants the sea"}
        assert event.payload["origin"] == nodes
        assert event.payload["produced_by"] == "model"
        assert event.payload["agent"] == "planner"
        assert event.payload["confirmed_by"] is None
        assert len(event.payload["artifact_id"]) == 32
        assert tree.head_id == head
        assert service.list(tree) == [event]
        assert service.list(tree, "note") == [event]
        assert service.list(tree, "brief") == []

    @pytest.mark.parametrize(
        ("overrides", "message"),
        [
            ({"allowed_types": ()}, r"'note' refused: this agent's profile does not allow it"),
            ({"type": "poem"}, r"'poem' refused: it is not a registered artifact type"),
            (
                {"type": "brief", "data": {"title": "t", "summary": "s"}},
                r"'brief' refused: it is system-only",
            ),
            ({"data": {"text": ""}}, r"'note' refused: its data does not fit NoteData: text"),
            ({"data": {"words": "x"}}, r"'note' refused: its data does not fit NoteData"),
            ({"origin": []}, r"'note' refused: its origin is empty"),
            (
                {"origin": ["0" * 32]},
                r"'note' refused: origin node\(s\) '0{32}' do not exist in session",
            ),
        ],
        ids=[
            "not-allowed",
            "unknown",
            "system-only",
            "bad-data",
            "extra-field",
            "no-origin",
            "unknown-origin",
        ],
    )
    async def test_refusals_name_the_type_and_append_nothing(
        self,
        service: ArtifactService,
        tree: SessionTree,
        nodes: list[str],
        overrides: dict[str, Any],
        message: str,
    ) -> None:
        before = len(tree)
        origin = overrides.pop("origin", nodes)
        with pytest.raises(ArtifactError, match=message):
            await _note(service, tree, origin, **overrides)
        assert len(tree) == before
        assert service.list(tree) == []

    async def test_system_only_is_refused_even_when_the_profile_allows_it(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        """The profile listing ``brief`` does not open the model's path to it."""
        with pytest.raises(ArtifactError, match="system-only"):
            await service.emit_from_model(
                tree,
                type="brief",
                data={"title": "Trip", "summary": "Sea"},
                origin=nodes,
                agent="planner",
                allowed_types=("brief",),
            )
        assert service.list(tree) == []


class TestModelToolCall:
    async def _call(
        self, service: ArtifactService, tree: SessionTree, **arguments: Any
    ) -> tuple[str, bool]:
        handler = artifact_tool_handler(
            service, get_tree=lambda _context: tree, allowed_types=NOTE_AND_BRIEF
        )
        registry = ToolRegistry([emit_artifact_tool(handler)])
        call = ToolCall(id="c1", name="emit_artifact", arguments=json.dumps(arguments))
        context = ToolContext(session_key=KEY, turn_id="t1", tool_call_id="c1", agent_name="pl")
        outcome = await registry.execute(call, context)
        return outcome.content, outcome.is_error

    async def test_a_model_call_for_brief_is_an_error_result_and_appends_nothing(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        """Whatever the prompt says, the domain rejects the system-only type."""
        before = len(tree)
        content, is_error = await self._call(
            service,
            tree,
            type="brief",
            data={"title": "Trip", "summary": "Sea", "next_agent": "booker"},
            origin=nodes,
        )
        assert is_error
        assert content.startswith("error: artifact type 'brief' refused: it is system-only")
        assert len(tree) == before
        assert service.list(tree) == []

    async def test_a_model_call_for_note_records_it(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        content, is_error = await self._call(
            service, tree, type="note", data={"text": "sea"}, origin=nodes[:1]
        )
        assert not is_error
        [event] = service.list(tree, "note")
        assert content == (
            f"recorded artifact note {event.payload['artifact_id']} (node {event.node_id})"
        )
        assert event.payload["agent"] == "pl"
        assert event.payload["origin"] == nodes[:1]

    async def test_a_bad_origin_is_an_error_result(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        content, is_error = await self._call(
            service, tree, type="note", data={"text": "sea"}, origin=["nope"]
        )
        assert is_error
        assert "'nope'" in content
        assert "do not exist" in content
        assert service.list(tree) == []


class TestProduceConfirmed:
    async def test_the_confirmed_path_produces_a_brief(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        """``produce_confirmed`` records the brief, produced by the system, with its confirmer."""
        event = await service.produce_confirmed(
            tree,
            type="brief",
            data={"title": "Trip", "summary": "Sea", "next_agent": "booker"},
            origin=nodes,
            confirmed_by="user-42",
        )
        assert event.type == "artifact.brief"
        assert event.payload["produced_by"] == "system"
        assert event.payload["confirmed_by"] == "user-42"
        assert event.payload["data"] == {"title": "Trip", "summary": "Sea", "next_agent": "booker"}
        assert service.list(tree, "brief") == [event]

    async def test_a_confirmation_needs_a_user(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        with pytest.raises(ArtifactError, match="'brief' refused: it needs the confirming user"):
            await service.produce_confirmed(
                tree,
                type="brief",
                data={"title": "Trip", "summary": "Sea"},
                origin=nodes,
                confirmed_by="",
            )
        assert service.list(tree) == []

    async def test_the_confirmed_path_still_checks_data_and_origin(
        self, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        with pytest.raises(ArtifactError, match="does not fit BriefData"):
            await service.produce_confirmed(
                tree, type="brief", data={"title": "Trip"}, origin=nodes, confirmed_by="u"
            )
        with pytest.raises(ArtifactError, match="origin is empty"):
            await service.produce_confirmed(
                tree, type="brief", data={"title": "T", "summary": "S"}, origin=[], confirmed_by="u"
            )
        assert service.list(tree) == []

    async def test_a_direct_append_cannot_forge_a_model_brief(
        self, log: SessionLog, tree: SessionTree, nodes: list[str]
    ) -> None:
        """Even below the service, the envelope refuses an unconfirmed system-only artifact."""
        payload = {
            "artifact_id": "a" * 32,
            "type": "brief",
            "data": {"title": "T", "summary": "S"},
            "origin": nodes,
            "produced_by": "model",
        }
        with pytest.raises(SessionError, match="system-only"):
            await log.append(tree, "artifact.brief", payload)
        with pytest.raises(SessionError, match="type"):
            await log.append(tree, "artifact.note", {**payload, "produced_by": "system"})


class TestPersistence:
    async def test_artifacts_survive_reloading_the_session(
        self, db: Database, service: ArtifactService, tree: SessionTree, nodes: list[str]
    ) -> None:
        note = await _note(service, tree, nodes)
        brief = await service.produce_confirmed(
            tree,
            type="brief",
            data={"title": "Trip", "summary": "Sea"},
            origin=[nodes[1], note.node_id],
            confirmed_by="user-42",
        )
        reloaded = await SessionLog(db).load(KEY)
        fresh = ArtifactService(SessionLog(db))
        assert fresh.list(reloaded) == [note, brief]
        assert fresh.list(reloaded, "brief")[0].payload["confirmed_by"] == "user-42"
        assert reloaded.get(brief.node_id).payload["origin"] == [nodes[1], note.node_id]
