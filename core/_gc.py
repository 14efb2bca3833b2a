"""Garbage-collector handling for bulk loads of long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["bulk_allocation"]


@contextmanager
def bulk_allocation() -> Iterator[None]:
    """Pause the cyclic collector while many long-lived objects are built, then freeze them.

    Building 100,000 binding records triggers collection after collection, each
    scanning everything allocated so far: about half of a start-up's time. The
    records live until their binding ends, so after the load they are moved
    to the permanent generation (``gc.freeze``), and later full collections
    skip them too. The collector is re-enabled only if it was on before.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
            gc.freeze()
