"""What a bound thread owes: the messages an agent's words went into, until they show them.

A streamed answer reaches a channel as messages edited while it grows. When the
channel refuses the edits for a while (a 5xx, a 429) and the process dies, the
answer the session log holds was never shown in full. Like a completion
announcement, each finished message is therefore recorded before its final
text is posted (:meth:`Transcript.owe`), and marked shown once it is; whatever
is still owed when a process starts (or an announcement is about to be posted
under it) is compared with what the thread shows and finished there, once.

A message that still holds a tool call's line waiting for an outcome (an
approval, a call under way) stays recorded after it is shown, so a later
process edits that line in place instead of writing a second one.

:mod:`~core.transcript.records` holds the values, :mod:`~core.transcript.repository`
the table's queries, :mod:`~core.transcript.service` the :class:`Transcript`.
"""

from __future__ import annotations

from core.transcript.records import SentPart, ThreadMessage
from core.transcript.service import Transcript, TranscriptSink, TranscriptSinks

__all__ = ["SentPart", "ThreadMessage", "Transcript", "TranscriptSink", "TranscriptSinks"]
