"""The Matrix adapter: translation between a homeserver and the core, nothing decided here.

So far: an account logs in with its token, syncs, and joins the rooms it may serve
(:class:`MatrixConnection`); people's messages in bound threads go to the core inbox,
the sync position saved after them (:class:`~adapters.matrix.inbox.MatrixInbox`); and
``!`` commands are answered as replies (:class:`~adapters.matrix.commands.MatrixCommands`);
a binding that names no conversation opens a thread on a root message in the room
(:class:`~adapters.matrix.threads.MatrixThreads`); a streamed answer is posted in its
thread and edited with ``m.replace`` (:class:`~adapters.matrix.streaming.MatrixStream`),
every send once per transaction id and at the homeserver's pace
(:class:`~adapters.matrix.sending.MatrixSender`); a session's agent answers in its bound
thread that way, one message per stretch of words, closed at a tool call or the turn's
end (:class:`~adapters.matrix.presenter.MatrixPresenters`).
"""

from __future__ import annotations

from adapters.matrix.connection import MatrixConnection
from adapters.matrix.errors import MATRIX_FAILURES, MatrixLoginError, matrix_said

__all__ = ["MATRIX_FAILURES", "MatrixConnection", "MatrixLoginError", "matrix_said"]
