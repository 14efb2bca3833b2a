"""What the domain tells the channels, as one typed union: the events of its stream.

Each service publishes its own (the runtime an agent started, the bindings a
conversation bound or let go, the subagents a task seen through) on one
:class:`~core.stream.EventStream`; a chat account subscribes once and matches
on these types.
"""

from __future__ import annotations

from core.bindings.records import BindingEnded, BindingStarted
from core.runtime import AgentStarted
from core.stream import EventStream
from core.subagents.records import SubagentFinished

__all__ = [
    "AgentStarted",
    "BindingEnded",
    "BindingStarted",
    "DomainEvent",
    "DomainEvents",
    "SubagentFinished",
]

DomainEvent = AgentStarted | BindingStarted | BindingEnded | SubagentFinished
DomainEvents = EventStream[DomainEvent]
