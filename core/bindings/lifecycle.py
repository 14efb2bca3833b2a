"""Binding lifecycle: when a binding has expired, and the background work that ends it.

A binding ends on whichever comes first of its idle deadline (last activity +
idle timeout) and its hard deadline (``expires_at``, i.e. bound_at + max age or
ttl). ``0`` for either limit means never. The sweep and the touch flush share
one maintenance task so the application owns a single background task per
binding service.

The deadlines themselves are a record's business
(:meth:`SessionBindingRecord.expiry_reason`); this module only depends on the
service, never the other way round.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from core.bindings.records import ExpiryReason, SessionBindingRecord
from core.errors import StoreError
from core.logging import get_logger

if TYPE_CHECKING:
    from core.bindings.service import SessionBindingService

__all__ = ["ExpiryReason", "expiry_reason", "run_maintenance", "sweep"]

_log = get_logger("core.bindings")


def expiry_reason(record: SessionBindingRecord, now: datetime) -> ExpiryReason | None:
    """Function form of :meth:`SessionBindingRecord.expiry_reason`, kept for existing callers."""
    return record.expiry_reason(now)


async def sweep(service: SessionBindingService) -> list[SessionBindingRecord]:
    """End every binding past a deadline; returns the ones that ended.

    Only bindings of this process's guilds: another process sweeps its own.
    Candidates are chosen from one snapshot, then each goes through
    :meth:`SessionBindingService.expire`, which re-reads it first: ending one
    binding awaits its farewell, and a touch to the next may land meanwhile.
    """
    now = service.clock.now()
    candidates = [r.binding_id for r in service.live() if r.expiry_reason(now) and service.mine(r)]
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
