"""Typed artifacts: session events ``artifact.<type>`` validated by a registry of schemas."""

from __future__ import annotations

from core.artifacts.registry import (
    EVENT_PREFIX,
    ArtifactPayload,
    ArtifactType,
    artifact_of,
    artifact_type,
    artifact_types,
    event_type,
    register_artifact_type,
)
from core.artifacts.service import ArtifactService, artifact_tool_handler

__all__ = [
    "EVENT_PREFIX",
    "ArtifactPayload",
    "ArtifactService",
    "ArtifactType",
    "artifact_of",
    "artifact_tool_handler",
    "artifact_type",
    "artifact_types",
    "event_type",
    "register_artifact_type",
]
