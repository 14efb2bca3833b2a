"""The registry of artifact types, and the session event each becomes.

An artifact type is a name and a pydantic schema for its data. Registering
``plan`` makes ``artifact.plan`` a session event type (kind ``system``) whose
payload is the envelope :class:`ArtifactPayload`: the data, validated against
the schema and stored as plain JSON, plus where it came from (``origin``, the
node ids it was derived from, never empty) and who produced it.

A *system-only* type can never be produced by the model: its envelope itself
requires ``produced_by="system"`` and a ``confirmed_by`` user, so not even a
direct :meth:`core.sessions.log.SessionLog.append` can store one without a
confirmation; :class:`core.artifacts.service.ArtifactService` is the only
producer and refuses every model request for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from core.errors import ArtifactError, SessionError
from core.sessions.events import SessionEvent
from core.sessions.payloads import register_event_type

__all__ = [
    "EVENT_PREFIX",
    "ArtifactPayload",
    "ArtifactType",
    "artifact_of",
    "artifact_type",
    "artifact_types",
    "event_type",
    "register_artifact_type",
    "validation_problems",
]

EVENT_PREFIX = "artifact."

ProducedBy = Literal["model", "system"]


@dataclass(frozen=True, slots=True)
class ArtifactType:
    """One registered artifact type."""

    name: str
    schema: type[BaseModel]
    system_only: bool
    payload_model: type[ArtifactPayload]

    @property
    def event_type(self) -> str:
        return event_type(self.name)


_TYPES: dict[str, ArtifactType] = {}


def event_type(name: str) -> str:
    """The session event type of artifact type ``name``: ``artifact.<name>``."""
    return f"{EVENT_PREFIX}{name}"


def validation_problems(exc: ValidationError) -> str:
    """Each error of ``exc`` as ``<field path>: <message>``, joined by ``; ``."""
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or '<data>'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    )


class ArtifactPayload(BaseModel):
    """The payload of every ``artifact.<type>`` event (each type has its own subclass,
    whose ``type`` can only be that type's name)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    artifact_id: str = Field(min_length=1)
    type: str
    data: dict[str, Any]
    origin: list[str] = Field(min_length=1)
    produced_by: ProducedBy
    agent: str | None = None
    confirmed_by: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _validate_data(cls, value: Any) -> Any:
        """Validate ``data`` against the schema registered for ``type``; store its JSON dump."""
        if not isinstance(value, Mapping):
            return value
        spec = _TYPES.get(str(value.get("type")))
        if spec is None or not isinstance(value.get("data"), Mapping):
            return value  # the field validation reports the problem
        try:
            data = spec.schema.model_validate(value["data"]).model_dump(mode="json")
        except ValidationError as exc:
            raise ValueError(
                f"data does not fit {spec.schema.__name__}: {validation_problems(exc)}"
            ) from exc
        return {**value, "data": data}

    @model_validator(mode="after")
    def _check_producer(self) -> ArtifactPayload:
        spec = _TYPES.get(self.type)
        if spec is None:
            raise ValueError(f"unknown artifact type {self.type!r}")
        if spec.system_only and (self.produced_by != "system" or not self.confirmed_by):
            raise ValueError(
                f"artifact type {self.type!r} is system-only: it needs produced_by='system' "
                "and the confirming user in confirmed_by"
            )
        if any(not node_id for node_id in self.origin):
            raise ValueError("origin holds an empty node id")
        return self


def _same_schema(a: type[BaseModel], b: type[BaseModel]) -> bool:
    """The same class, or the same class defined again (a module imported twice)."""
    if a is b:
        return True
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__) and (
        a.model_json_schema() == b.model_json_schema()
    )


def register_artifact_type(
    name: str, schema: type[BaseModel], *, system_only: bool = False
) -> ArtifactType:
    """Make ``name`` an artifact type whose data fits ``schema``; registers ``artifact.<name>``.

    Registering the same type again (same schema, same ``system_only``) does
    nothing, so a module that registers its types may be imported twice.

    Raises:
        ArtifactError: the name is malformed, or already registered differently.
    """
    known = _TYPES.get(name)
    if known is not None:
        if known.system_only == system_only and _same_schema(known.schema, schema):
            if known.schema is not schema:
                known = ArtifactType(name, schema, system_only, known.payload_model)
                _TYPES[name] = known
            return known
        raise ArtifactError(
            name,
            f"it is already registered with {known.schema.__qualname__} "
            f"(system_only={known.system_only}); pick another type name",
        )
    model = create_model(
        f"Artifact_{name.replace('.', '_').replace('-', '_')}_Payload",
        __base__=ArtifactPayload,
        # A Literal of a name known only at run time: valid for pydantic, not a static type.
        type=(Literal[name], name),  # type: ignore[arg-type]
    )
    try:
        register_event_type(event_type(name), "system", model)
    except SessionError as exc:
        raise ArtifactError(name, f"it cannot be a session event type ({exc})") from exc
    spec = ArtifactType(name, schema, system_only, model)
    _TYPES[name] = spec
    return spec


def artifact_type(name: str) -> ArtifactType | None:
    """The registered type ``name``, or ``None``."""
    return _TYPES.get(name)


def artifact_of(event: SessionEvent) -> ArtifactPayload:
    """The artifact ``event`` records: its payload, typed.

    Raises:
        ArtifactError: ``event`` records no artifact this process reads (another type, or
            an artifact type not registered here).
    """
    artifact = event.data_as(ArtifactPayload)
    if artifact is None:
        raise ArtifactError(
            event.type.removeprefix(EVENT_PREFIX),
            f"event {event.node_id} records no artifact of a type registered here",
        )
    return artifact


def artifact_types() -> dict[str, ArtifactType]:
    """Every registered artifact type (a copy)."""
    return dict(_TYPES)
