"""Producing and listing artifacts: the model's path and the confirmed system path.

:meth:`ArtifactService.emit_from_model` is what the ``emit_artifact`` tool
reaches; it refuses anything the agent's profile does not allow, every
system-only type (whatever the prompt told the model), data that does not fit
the type's schema, and an origin that is empty or names nodes the session does
not have. :meth:`ArtifactService.produce_confirmed` is the only way to a
system-only artifact, and records the user whose confirmation produced it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from core.agent.builtin_tools import ArtifactHandler, EmitArtifactArgs
from core.agent.tools import ToolContext
from core.artifacts.registry import (
    EVENT_PREFIX,
    ArtifactType,
    ProducedBy,
    artifact_of,
    artifact_type,
    artifact_types,
    event_type,
    validation_problems,
)
from core.errors import ArtifactError
from core.sessions.events import SessionEvent
from core.sessions.log import SessionLog
from core.sessions.tree import SessionTree

__all__ = ["ArtifactService", "artifact_tool_handler"]

_Events = list[SessionEvent]


def _lookup(name: str) -> ArtifactType:
    spec = artifact_type(name)
    if spec is None:
        known = ", ".join(sorted(artifact_types())) or "none"
        raise ArtifactError(name, f"it is not a registered artifact type (known: {known})")
    return spec


def _validate_data(spec: ArtifactType, data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return spec.schema.model_validate(dict(data)).model_dump(mode="json")
    except ValidationError as exc:
        raise ArtifactError(
            spec.name, f"its data does not fit {spec.schema.__name__}: {validation_problems(exc)}"
        ) from exc


def _validate_origin(spec: ArtifactType, tree: SessionTree, origin: Sequence[str]) -> list[str]:
    if not origin:
        raise ArtifactError(
            spec.name, "its origin is empty; name the node ids the artifact was derived from"
        )
    events = {event.node_id for event in tree.events}
    missing = [node_id for node_id in origin if node_id not in events]
    if missing:
        raise ArtifactError(
            spec.name,
            f"origin node(s) {', '.join(map(repr, missing))} do not exist in session "
            f"{tree.session_key!r}; use node ids of this session",
        )
    return list(dict.fromkeys(origin))


class ArtifactService:
    """Appends artifacts to session trees as ``artifact.<type>`` events, and lists them."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log

    async def emit_from_model(
        self,
        tree: SessionTree,
        *,
        type: str,
        data: Mapping[str, Any],
        origin: Sequence[str],
        agent: str | None,
        allowed_types: Collection[str],
    ) -> SessionEvent:
        """Record an artifact the model asked for, if its profile allows that type.

        Raises:
            ArtifactError: the type is unknown, not in ``allowed_types``, or system-only;
                the data does not fit its schema; the origin is empty or names nodes
                the session does not have. Nothing is appended then.
        """
        spec = _lookup(type)
        if spec.system_only:
            raise ArtifactError(
                type,
                "it is system-only: it is produced only after a user confirms, "
                "never by a model tool call",
            )
        if type not in allowed_types:
            allowed = ", ".join(sorted(allowed_types)) or "none"
            raise ArtifactError(
                type, f"this agent's profile does not allow it (allowed: {allowed})"
            )
        return await self._append(tree, spec, data, origin, "model", agent=agent)

    async def produce_confirmed(
        self,
        tree: SessionTree,
        *,
        type: str,
        data: Mapping[str, Any],
        origin: Sequence[str],
        confirmed_by: str,
        agent: str | None = None,
    ) -> SessionEvent:
        """Record an artifact after a user's explicit confirmation (the only path to a
        system-only type); ``confirmed_by`` is that user's id.

        Raises:
            ArtifactError: no ``confirmed_by``, an unknown type, bad data or a bad origin.
        """
        spec = _lookup(type)
        if not confirmed_by:
            raise ArtifactError(
                type, "it needs the confirming user (confirmed_by) and none was given"
            )
        return await self._append(
            tree, spec, data, origin, "system", agent=agent, confirmed_by=confirmed_by
        )

    def list(self, tree: SessionTree, type: str | None = None) -> _Events:
        """The session's artifact events in the order they were recorded; only of ``type``
        (an artifact type name) when given."""
        if type is None:
            return [event for event in tree.events if event.type.startswith(EVENT_PREFIX)]
        wanted = event_type(type.removeprefix(EVENT_PREFIX))
        return [event for event in tree.events if event.type == wanted]

    async def _append(
        self,
        tree: SessionTree,
        spec: ArtifactType,
        data: Mapping[str, Any],
        origin: Sequence[str],
        produced_by: ProducedBy,
        *,
        agent: str | None,
        confirmed_by: str | None = None,
    ) -> SessionEvent:
        payload = {
            "artifact_id": uuid.uuid4().hex,
            "type": spec.name,
            "data": _validate_data(spec, data),
            "origin": _validate_origin(spec, tree, origin),
            "produced_by": produced_by,
            "agent": agent,
            "confirmed_by": confirmed_by,
        }
        return await self._log.append(tree, spec.event_type, payload)


def artifact_tool_handler(
    service: ArtifactService,
    *,
    get_tree: Callable[[ToolContext], SessionTree],
    allowed_types: Collection[str],
) -> ArtifactHandler:
    """The handler for :func:`core.agent.builtin_tools.emit_artifact_tool` (the model's path).

    A refusal raises :class:`ArtifactError`, which the tool registry turns into
    an error result the model reads; nothing is appended then.
    """
    allowed = frozenset(allowed_types)

    async def handle(args: EmitArtifactArgs, context: ToolContext) -> str:
        event = await service.emit_from_model(
            get_tree(context),
            type=args.type,
            data=args.data,
            origin=args.origin,
            agent=context.agent_name,
            allowed_types=allowed,
        )
        artifact = artifact_of(event)
        return f"recorded artifact {args.type} {artifact.artifact_id} (node {event.node_id})"

    return handle
