"""The fake's state saved change by change: before each answer, replayed after a crash."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from fakediscord import FakeDiscord, Interaction, InteractionResponse
from fakediscord.persistence import JOURNAL_SUFFIX, Journal
from fakediscord.state import State

TOKEN = "bot-token-journal"


def loaded(path: Path) -> State:
    """The state a new process would find in ``path``: snapshot plus journal."""
    state = State()
    Journal(path).open(state)
    return state


def world(fake: FakeDiscord) -> tuple[int, int, int]:
    bot = fake.add_bot(TOKEN, "threadbound")
    guild = fake.add_guild("g")
    channel = fake.add_text_channel(guild, "general")
    alice = fake.add_member(guild, "alice")
    return bot.id, channel.id, alice.id


class TestJournal:
    async def test_each_commit_is_on_disk_and_replayed_in_order(self, tmp_path: Path) -> None:
        path = tmp_path / "state.json"
        async with FakeDiscord() as fake:
            assert not fake.persist(path)
            _, channel, alice = world(fake)
            assert fake.commit() > 0
            first = await fake.user_says(channel, alice, "one")
            fake.commit()
            fake.ops.edit_message(first, {"content": "one, edited"})
            await fake.user_says(channel, alice, "two")
            fake.commit()
            thread = fake.add_thread(channel, "a thread", owner=alice)
            fake.ops.delete_channel(thread)
            fake.commit()
            assert fake.commit() == 0  # nothing changed: nothing written
            assert (tmp_path / f"state.json{JOURNAL_SUFFIX}").stat().st_size > 0

            restored = loaded(path)  # as a process started now, beside this one, finds it
            assert restored.to_dict() == fake.state.to_dict()
            assert [restored.messages[i].content for i in restored.channel_messages[channel]] == [
                "one, edited",
                "two",
                "a thread",  # the thread's THREAD_CREATED line stays in the channel
            ]
            assert thread.id not in restored.channels
            assert restored.new_id() > max(fake.state.messages)

    async def test_a_torn_last_line_was_never_answered_and_is_dropped(self, tmp_path: Path) -> None:
        path = tmp_path / "state.json"
        async with FakeDiscord() as fake:
            fake.persist(path)
            _, channel, alice = world(fake)
            await fake.user_says(channel, alice, "kept")
            fake.commit()
            journal = tmp_path / f"state.json{JOURNAL_SUFFIX}"
            with journal.open("ab") as file:
                file.write(b'{"put": {"messages": {"1": {"id": 1')  # the crash cut this write
            restored = loaded(path)
            assert [restored.messages[i].content for i in restored.channel_messages[channel]] == [
                "kept"
            ]
            assert restored.to_dict() == fake.state.to_dict()

    def test_the_journal_is_folded_into_the_snapshot_when_it_outgrows_it(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "state.json"
        fake = FakeDiscord()
        journal = Journal(path, compact_min_bytes=0)
        journal.open(fake.state)
        _, channel, alice = world(fake)
        journal.commit(fake.state)
        for n in range(5):
            fake.ops.post_message(channel, alice, {"content": f"message {n}"})
            journal.commit(fake.state)
        assert journal.journal_path.stat().st_size < path.stat().st_size
        assert loaded(path).to_dict() == fake.state.to_dict()

    def test_a_crash_between_snapshot_and_journal_truncation_replays_to_the_same_state(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "state.json"
        fake = FakeDiscord()
        journal = Journal(path)
        journal.open(fake.state)
        _, channel, alice = world(fake)
        journal.commit(fake.state)
        message = fake.ops.post_message(channel, alice, {"content": "first"})
        journal.commit(fake.state)
        fake.ops.edit_message(message, {"content": "second"})
        journal.commit(fake.state)
        old_journal = journal.journal_path.read_bytes()
        journal.compact(fake.state)
        journal.journal_path.write_bytes(old_journal)  # as if the truncation never happened
        restored = loaded(path)
        assert restored.messages[message.id].content == "second"
        assert restored.to_dict() == fake.state.to_dict()


class TestBeforeTheAnswer:
    async def test_a_bot_message_is_on_disk_when_its_answer_arrives(self, tmp_path: Path) -> None:
        """A process killed right after answering loses nothing it answered."""
        path = tmp_path / "state.json"
        async with FakeDiscord() as fake, aiohttp.ClientSession() as http:
            fake.persist(path)
            _, channel, _ = world(fake)
            fake.commit()
            url = f"{fake.base_url}/api/v10/channels/{channel}/messages"
            headers = {"Authorization": f"Bot {TOKEN}"}
            async with http.post(url, json={"content": "answered"}, headers=headers) as response:
                assert response.status == 200
                sent = int((await response.json())["id"])
                on_disk = loaded(path)  # read before anything else runs in this process
            assert on_disk.messages[sent].content == "answered"

    async def test_a_failed_save_is_reported_and_the_answer_still_goes_out(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "state.json"
        async with FakeDiscord() as fake, aiohttp.ClientSession() as http:
            fake.persist(path)
            _, channel, _ = world(fake)
            fake.commit()
            failures: list[OSError] = []
            fake.on_save_failed = failures.append
            journal = fake.journal
            assert journal is not None

            def refuse(_state: State) -> int:
                raise OSError(28, "No space left on device")

            journal.commit = refuse  # type: ignore[method-assign]
            url = f"{fake.base_url}/api/v10/channels/{channel}/messages"
            headers = {"Authorization": f"Bot {TOKEN}"}
            async with http.post(url, json={"content": "kept"}, headers=headers) as response:
                assert response.status == 200
            assert [e.strerror for e in failures] == ["No space left on device"]


class TestInteractionsKept:
    async def test_who_used_a_command_and_its_token_survive_a_restart(self, tmp_path: Path) -> None:
        path = tmp_path / "state.json"
        async with FakeDiscord() as fake:
            fake.persist(path)
            bot, channel, alice = world(fake)
            now = datetime.now(UTC)
            answered = Interaction(
                id=fake.state.new_id(),
                token="interaction-token-1",
                type=2,
                application_id=bot,
                guild_id=fake.state.channel(channel).guild_id,
                channel_id=channel,
                user_id=alice,
                data={"name": "agents"},
                responses=[InteractionResponse("callback", {"type": 5}, now, callback_type=5)],
            )
            typing = Interaction(
                id=fake.state.new_id(),
                token="interaction-token-2",
                type=4,
                application_id=bot,
                guild_id=answered.guild_id,
                channel_id=channel,
                user_id=alice,
                data={"name": "agents"},
            )
            fake.state.interactions.update({answered.id: answered, typing.id: typing})
            fake.commit()

        async with FakeDiscord() as restarted, aiohttp.ClientSession() as http:
            restarted.persist(path)
            assert list(restarted.state.interactions) == [answered.id]  # autocomplete: not kept
            assert restarted.state.interactions[answered.id].user_id == alice
            url = f"{restarted.base_url}/api/v10/webhooks/{bot}/interaction-token-1"
            async with http.post(url, json={"content": "done"}) as response:
                assert response.status == 200, await response.text()
            followup = restarted.messages_in(channel)[-1]
            assert (followup.content, followup.interaction_id) == ("done", answered.id)
