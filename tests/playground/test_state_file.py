"""The fake Discord's state survives a save and a load (the playground's state_file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakediscord import FakeDiscord
from fakediscord.persistence import load_state, save_state


async def test_round_trip_keeps_entities_and_order(tmp_path: Path) -> None:
    path = tmp_path / "state" / "playground.json"
    async with FakeDiscord() as fake:
        fake.add_bot("token-1", "bot")
        guild = fake.add_guild("g")
        channel = fake.add_text_channel(guild, "general")
        alice = fake.add_member(guild, "alice")
        fake.add_member(guild, "root", admin=True)
        first = await fake.user_says(channel, alice, "hello")
        thread = fake.add_thread(channel, "a thread", owner=alice)
        await fake.user_says(thread, alice, "in the thread")
        await fake.react(first, alice, "🧭")
        fake.ops.edit_message(first, {"content": "hello, edited"})
        save_state(fake.state, path)
        before = fake.state.to_dict()

    restored = FakeDiscord()
    assert load_state(restored.state, path)
    assert restored.state.to_dict() | {"interactions": {}} == before | {"interactions": {}}
    assert [m.content for m in restored.messages_in(channel)] == ["hello, edited", "a thread"]
    assert [m.content for m in restored.messages_in(thread)] == ["in the thread"]
    assert restored.state.permissions(guild.id, alice.id) != restored.state.permissions(
        guild.id, next(u for u in restored.state.users.values() if u.username == "root").id
    )
    newest = max(restored.state.messages)
    assert restored.state.new_id() > newest  # new ids never collide with loaded ones


def test_missing_file_leaves_the_state_alone(tmp_path: Path) -> None:
    fake = FakeDiscord()
    assert not load_state(fake.state, tmp_path / "absent.json")
    assert fake.state.guilds == {}


@pytest.mark.parametrize("text", ["not json", json.dumps({"format": 99}), json.dumps([1])])
def test_a_foreign_file_is_refused_with_its_name(tmp_path: Path, text: str) -> None:
    path = tmp_path / "playground.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="cannot load the playground state"):
        load_state(FakeDiscord().state, path)
