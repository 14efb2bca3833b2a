"""What the domain tells the channels, as one typed union: the events of its stream.

Each service publishes its own (the runtime an agent started, the bindings a
conversation bound, changed or let go, the subagents a task seen through) on
one :class:`~core.stream.EventStream`; each feature that reacts subscribes
once, where it is built, and matches on these types.
"""

from __future__ import annotations

from core.bindings.records import BindingEnded, BindingStarted, BindingUpdated
from core.runtime import AgentStarted
from core.stream import EventStream
from core.subagents.records import SubagentFinished

__all__ = [
    "AgentStarted",
    "BindingEnded",
    "BindingStarted",
    "BindingUpdated",
    "DomainEvent",
    "DomainEvents",
    "SubagentFinished",
]

DomainEvent = AgentStarted | BindingStarted | BindingUpdated | BindingEnded | SubagentFinished
DomainEvents = EventStream[DomainEvent]
