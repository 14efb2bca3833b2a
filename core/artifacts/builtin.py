"""The artifact types threadbound ships: ``brief`` (system-only) and ``note`` (model).

Importing this module registers them; importing it again changes nothing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.artifacts.registry import register_artifact_type

__all__ = ["BRIEF", "NOTE", "BriefData", "NoteData"]


class BriefData(BaseModel):
    """The consolidated brief produced after the user presses "Ready — produce the brief"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    next_agent: str | None = None


class NoteData(BaseModel):
    """A note the model may record on the nodes it was derived from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)


BRIEF = register_artifact_type("brief", BriefData, system_only=True)
NOTE = register_artifact_type("note", NoteData)
