"""bulk_allocation: the collector paused during a bulk load, and what it does after."""

from __future__ import annotations

import gc
import weakref

from core._gc import bulk_allocation


class Node:
    """A GC-tracked object that can be made part of a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def test_promote_moves_what_was_built_to_the_oldest_generation() -> None:
    """Promoted objects are in the oldest generation, the young counts start over, and
    the collector is back on."""
    assert gc.isenabled()
    with bulk_allocation(promote=True):
        assert not gc.isenabled()
        built = [Node() for _ in range(2_000)]
    assert gc.isenabled()
    young = {id(o) for o in gc.get_objects(generation=0)}
    young |= {id(o) for o in gc.get_objects(generation=1)}
    assert not any(id(node) in young for node in built)
    assert any(o is built[0] for o in gc.get_objects(generation=2))
    assert gc.get_count()[0] < 700  # no young collection owed for the whole batch


def test_promoted_garbage_cycles_are_still_collected() -> None:
    """Unlike a freeze, promoting loses nothing: a cycle is freed by the next full collection."""
    with bulk_allocation(promote=True):
        first, second = Node(), Node()
        first.other, second.other = second, first
        probe = weakref.ref(first)
    del first, second
    assert probe() is not None  # a cycle: reference counting alone does not free it
    gc.collect()
    assert probe() is None


def test_the_collector_stays_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with bulk_allocation(promote=True):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
