"""adapters.matrix.permissions: who counts as a room's administrator."""

from __future__ import annotations

from adapters.matrix.permissions import creators, power_level


class TestPowerLevel:
    def test_listed_users_and_the_default(self) -> None:
        levels = {"users": {"@a:x": 100}, "users_default": 5}
        assert power_level(levels, "@a:x") == 100
        assert power_level(levels, "@b:x") == 5


class TestCreators:
    def test_from_room_version_12_the_creators_outrank_every_level(self) -> None:
        """Version 12 rooms leave their creators out of ``users``: the create event names
        them (its sender and ``additional_creators``)."""
        event = {
            "sender": "@a:x",
            "content": {"room_version": "12", "additional_creators": ["@b:x"]},
        }
        assert creators(event) == {"@a:x", "@b:x"}

    def test_before_version_12_creators_are_people_like_others(self) -> None:
        """Their power level is in ``users`` as for anyone."""
        assert creators({"sender": "@a:x", "content": {"room_version": "10"}}) == frozenset()
        assert creators({"sender": "@a:x", "content": {}}) == frozenset()
