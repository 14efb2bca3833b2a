"""Garbage-collector handling for bulk loads of long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["bulk_allocation"]


@contextmanager
def bulk_allocation(*, freeze: bool = False, promote: bool = False) -> Iterator[None]:
    """Pause the cyclic collector while many objects are built at once.

    Building 100,000 records triggers collection after collection, each
    scanning everything allocated so far: about half of a bulk load's time.
    The collector is re-enabled only if it was on before.

    ``freeze=True`` also moves everything alive to the permanent generation
    (``gc.freeze``) so later full collections skip it. Only for a one-off load
    at start-up: anything frozen, garbage cycles included, is never collected,
    so a load that repeats (a session rehydrated after each eviction) must not
    freeze.

    ``promote=True`` moves everything alive to the oldest generation instead
    (``gc.freeze`` then ``gc.unfreeze``, which only relinks lists and resets
    the counts). Re-enabled as they are, the collector would first run a young
    collection over every object just built (they all count as new), and the
    promotions that follow make a full collection (tens of milliseconds with a
    few sessions loaded) fall inside some later load at random. Promoted, the
    objects are scanned only by the full collections other work triggers, and
    garbage cycles that were young are collected at the next of those: later,
    never lost. For loads that repeat (a session rehydrated after each eviction).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if freeze or promote:
                gc.freeze()
            if promote:
                gc.unfreeze()
            gc.enable()
