"""What a homeserver answers when it refuses, and how the Matrix adapter says so.

Every Matrix call ends in one of :data:`MATRIX_FAILURES` when it fails; :func:`matrix_said`
turns one into text for a log line (``HTTP 403, M_FORBIDDEN, You are not invited``), never
with the access token (mautrix sends it in a header, which no error carries).
"""

from __future__ import annotations

import asyncio
from typing import Final

import aiohttp
from mautrix.errors import MatrixConnectionError, MatrixRequestError

from core.errors import ThreadboundError

__all__ = ["MATRIX_FAILURES", "MatrixLoginError", "is_retryable", "matrix_said"]

MATRIX_FAILURES: Final = (
    MatrixRequestError,
    MatrixConnectionError,
    aiohttp.ClientError,
    asyncio.TimeoutError,
    OSError,
)
"""Everything a client-server call through mautrix can fail with: the homeserver's
answer, a connection mautrix gave up on, a timeout, or the socket."""

_RETRYABLE_STATUS: Final = frozenset({429, 500, 502, 503, 504})


class MatrixLoginError(ThreadboundError):
    """A Matrix account cannot act: its token was refused, or belongs to another user.

    Args:
        account_id: the ``[channels.matrix.accounts.<id>]`` it is.
        token_env: the variable the token came from (named, never its value).
        reason: what the homeserver said, and what to do.
    """

    def __init__(self, account_id: str, token_env: str, reason: str) -> None:
        self.account_id = account_id
        self.token_env = token_env
        self.reason = reason
        super().__init__(
            f"Matrix account {account_id!r} (token from {token_env}) cannot log in: {reason}"
        )


def matrix_said(exc: BaseException) -> str:
    """``HTTP 403, M_FORBIDDEN, You are not invited``; anything else by its type."""
    if isinstance(exc, MatrixRequestError):
        status = getattr(exc, "http_status", 0)
        errcode, message = getattr(exc, "errcode", None), getattr(exc, "message", None)
        parts = [f"HTTP {status}" if status else "", errcode or "", message or ""]
        return ", ".join(part for part in parts if part) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def is_retryable(exc: BaseException) -> bool:
    """A failure worth trying again: the connection, a timeout, a 5xx or a rate limit."""
    if isinstance(exc, MatrixRequestError):
        return getattr(exc, "http_status", 0) in _RETRYABLE_STATUS
    return isinstance(exc, MATRIX_FAILURES)
