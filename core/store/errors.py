"""Turning a failed store call into the :class:`~core.errors.StoreError` callers handle.

Why: the services above the store promise ``StoreError`` (and nothing from
SQLAlchemy) when a write or read does not go through, and each says what was
not done in words a user can act on. One helper keeps that message shape,
``"<what>: <ExceptionName>[; <leaves>]"``, the same everywhere instead of being
re-typed in every ``except SQLAlchemyError`` block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import SQLAlchemyError

from core.errors import StoreError

__all__ = ["store_errors"]


@contextmanager
def store_errors(what: str, *, leaves: str | None = None) -> Iterator[None]:
    """Re-raise a ``SQLAlchemyError`` in the block as ``StoreError("<what>: <Name>[; <leaves>]")``.

    ``what`` says what could not be done ("could not list accepted handoffs");
    ``leaves`` optionally says what state that leaves ("nothing was bound").
    Only the exception's class name goes into the message, never its text,
    which can carry SQL, parameters or a connection URL. The original is
    chained as ``__cause__`` for the logs. Other exceptions pass through, so a
    caller can still catch a narrower one (``IntegrityError``) inside the block.
    """
    try:
        yield
    except SQLAlchemyError as exc:
        suffix = f"; {leaves}" if leaves else ""
        raise StoreError(f"{what}: {type(exc).__name__}{suffix}") from exc
