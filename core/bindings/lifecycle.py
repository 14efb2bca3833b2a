"""Binding lifecycle: when a binding has expired, and the background work that ends it.

A binding ends on whichever comes first of its idle deadline (last activity +
idle timeout) and its hard deadline (``expires_at``, i.e. bound_at + max age or
ttl). ``0`` for either limit means never. The sweep and the touch flush share
one maintenance task so the application owns a single background task per
binding service.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from core.bindings.records import SessionBindingRecord
from core.errors import StoreError
from core.logging import get_logger

if TYPE_CHECKING:
    from core.bindings.service import SessionBindingService

__all__ = ["ExpiryReason", "expiry_reason", "run_maintenance", "sweep"]

ExpiryReason = Literal["idle-expired", "max-age-expired"]

_log = get_logger("core.bindings")


def expiry_reason(record: SessionBindingRecord, now: datetime) -> ExpiryReason | None:
    """``idle-expired`` / ``max-age-expired`` for whichever deadline passed first, else None."""
    deadlines: list[tuple[datetime, ExpiryReason]] = []
    if record.idle_timeout_ms:
        last = record.last_activity_at or record.bound_at
        deadlines.append((last + timedelta(milliseconds=record.idle_timeout_ms), "idle-expired"))
    if record.expires_at is not None:
        deadlines.append((record.expires_at, "max-age-expired"))
    elif record.max_age_ms:
        deadlines.append(
            (record.bound_at + timedelta(milliseconds=record.max_age_ms), "max-age-expired")
        )
    passed = [deadline for deadline in deadlines if deadline[0] <= now]
    return min(passed)[1] if passed else None


async def sweep(service: SessionBindingService) -> list[SessionBindingRecord]:
    """End every binding past a deadline; returns the ones that ended.

    Candidates are chosen from one snapshot, then each goes through
    :meth:`SessionBindingService.expire`, which re-reads it first: ending one
    binding awaits its farewell, and a touch to the next may land meanwhile.
    """
    now = service.clock.now()
    candidates = [r.binding_id for r in service.live() if expiry_reason(r, now)]
    expired: list[SessionBindingRecord] = []
    for binding_id in candidates:
        ended = await service.expire(binding_id)
        if ended is not None:
            expired.append(ended)
    return expired


async def run_maintenance(
    service: SessionBindingService, *, touch_flush_seconds: float, sweep_seconds: float
) -> None:
    """Flush touches every ``touch_flush_seconds`` and sweep about every ``sweep_seconds``.

    Runs forever on the service's clock; the application owns the task, cancels
    it on shutdown and then calls ``service.close()`` for the final flush. A
    store failure during a sweep is logged and retried at the next one.
    """
    since_sweep = 0.0
    while True:
        await service.clock.sleep(touch_flush_seconds)
        await service.flush_touches()
        since_sweep += touch_flush_seconds
        if since_sweep >= sweep_seconds:
            since_sweep = 0.0
            try:
                await sweep(service)
            except StoreError:
                _log.warning("binding.sweep_failed", exc_info=True)
