"""Garbage-collector handling for bulk loads of long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["bulk_allocation"]


@contextmanager
def bulk_allocation(*, freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic collector while many objects are built at once.

    Building 100,000 records triggers collection after collection, each
    scanning everything allocated so far: about half of a bulk load's time.
    The collector is re-enabled only if it was on before.

    ``freeze=True`` also moves everything alive to the permanent generation
    (``gc.freeze``) so later full collections skip it. Only for a one-off load
    at start-up: anything frozen, garbage cycles included, is never collected,
    so a load that repeats (a session rehydrated after each eviction) must not
    freeze.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
            if freeze:
                gc.freeze()
