"""The Matrix adapter: translation between a homeserver and the core, nothing decided here.

So far only the connection: an account logs in with its token, syncs, and joins the
rooms it may serve (:class:`MatrixConnection`).
"""

from __future__ import annotations

from adapters.matrix.connection import MatrixConnection
from adapters.matrix.errors import MATRIX_FAILURES, MatrixLoginError, matrix_said

__all__ = ["MATRIX_FAILURES", "MatrixConnection", "MatrixLoginError", "matrix_said"]
