"""Changing a live binding's settings: its windows and its metadata.

Split from :mod:`core.bindings.service` (which mixes this in) to keep that
module to binding, ending, touching and expiry. Both changes are committed
before they return and then replace the in-memory record, re-read first,
because a touch may have replaced it while the write was in flight.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from core import log_events
from core.bindings.records import SessionBindingRecord
from core.bindings.repository import BindingRepository
from core.errors import BindingError, StoreError
from core.logging import get_logger

if TYPE_CHECKING:
    from core.bindings._index import BindingIndex
    from core.store.database import Database

__all__ = ["BindingSettings"]

_log = get_logger("core.bindings")


def _not_live(binding_id: str) -> BindingError:
    return BindingError(f"binding {binding_id} is not live; bind the conversation again")


class BindingSettings:
    """Mixin of :class:`~core.bindings.service.SessionBindingService`; uses its store and index."""

    _db: Database
    _index: BindingIndex
    _metadata_lock: asyncio.Lock
    """Metadata changes are read-merge-write across an await: one at a time, or a
    concurrent change (a thread's mode and its status line, say) is lost."""

    if TYPE_CHECKING:  # provided by the service; declared for type checkers only

        async def _refresh_from_store(self, record: SessionBindingRecord) -> None: ...

    def _live_record(self, binding_id: str) -> SessionBindingRecord:
        record = self._index.get(binding_id)
        if record is None or record.status != "active":
            raise _not_live(binding_id)
        return record

    async def update_metadata(self, binding_id: str, /, **changes: Any) -> SessionBindingRecord:
        """Merge ``changes`` into a live binding's metadata (a thread's default mode, say).

        Raises:
            BindingError: the binding is not live.
            StoreError: the store did not commit; the metadata is unchanged.
        """
        async with self._metadata_lock:
            return await self._update_metadata(binding_id, changes)

    async def _update_metadata(
        self, binding_id: str, changes: dict[str, Any]
    ) -> SessionBindingRecord:
        record = self._live_record(binding_id)
        metadata = {**record.metadata, **changes}
        try:
            done = await self._db.run(
                lambda conn: BindingRepository(conn).set_metadata(binding_id, metadata)
            )
        except SQLAlchemyError as exc:
            raise StoreError(
                f"could not record the settings of binding {binding_id}: {type(exc).__name__}"
            ) from exc
        if not done:
            await self._refresh_from_store(record)
            raise _not_live(binding_id)
        current = self._index.by_id.get(binding_id, record)
        updated = current.model_copy(update={"metadata": metadata})
        self._index.replace(updated)
        return updated

    async def set_lifetime(
        self,
        binding_id: str,
        /,
        *,
        idle_timeout_ms: int | None = None,
        max_age_ms: int | None = None,
        actor: str | None = None,
    ) -> SessionBindingRecord:
        """Change a live binding's idle and/or max-age window (0 = never); None keeps one.

        ``actor`` (who asked) goes into the ``binding.lifetime_changed`` audit line.

        The hard deadline is recomputed from ``bound_at``, so a max age shorter
        than the binding's age makes it expire at the sweeper's next pass.
        Returns only after the store committed the change.

        Raises:
            BindingError: a negative window, or the binding is not live.
            StoreError: the store did not commit; the windows are unchanged.
        """
        for name, value in (("idle_timeout_ms", idle_timeout_ms), ("max_age_ms", max_age_ms)):
            if value is not None and value < 0:
                raise BindingError(f"{name} must be 0 (never) or positive, not {value}")
        record = self._live_record(binding_id)
        idle = record.idle_timeout_ms if idle_timeout_ms is None else idle_timeout_ms
        max_age = record.max_age_ms if max_age_ms is None else max_age_ms
        expires_at = record.bound_at + timedelta(milliseconds=max_age) if max_age else None
        try:
            done = await self._db.run(
                lambda conn: BindingRepository(conn).set_lifetime(
                    binding_id, idle_timeout_ms=idle, max_age_ms=max_age, expires_at=expires_at
                )
            )
        except SQLAlchemyError as exc:
            raise StoreError(
                f"could not record the new windows of binding {binding_id}: "
                f"{type(exc).__name__}; they are unchanged"
            ) from exc
        if not done:
            await self._refresh_from_store(record)
            raise _not_live(binding_id)
        # Re-read: a touch may have replaced the record while the write was in flight.
        current = self._index.by_id.get(binding_id, record)
        updated = current.model_copy(
            update={"idle_timeout_ms": idle, "max_age_ms": max_age, "expires_at": expires_at}
        )
        self._index.replace(updated)
        log_events.emit(
            log_events.BindingLifetimeChanged(
                **updated.log_fields(),
                idle_timeout_ms=idle,
                max_age_ms=max_age,
                expires_at=expires_at,
                actor=actor,
            ),
            _log,
        )
        return updated
