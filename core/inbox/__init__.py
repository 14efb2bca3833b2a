"""The inbox: what people say to the bot, recorded first, handed over in order, once.

:mod:`~core.inbox.records` holds the values, :mod:`~core.inbox.repository` the
tables' queries, :mod:`~core.inbox.files` fetching a message's files one by
one, and :mod:`~core.inbox.service` the :class:`Inbox` itself.
"""

from __future__ import annotations

from core.inbox.files import FileUnavailable
from core.inbox.records import (
    FileRef,
    InboxMessage,
    InboxPress,
    Mode,
    Outcome,
    OutcomeKind,
    Source,
)
from core.inbox.service import Inbox, InboxChannel

__all__ = [
    "FileRef",
    "FileUnavailable",
    "Inbox",
    "InboxChannel",
    "InboxMessage",
    "InboxPress",
    "Mode",
    "Outcome",
    "OutcomeKind",
    "Source",
]
