"""Handoffs over the fake Discord: the brief button, Accept / Reject, and their guarantees."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.commands.artifacts import NO_ARTIFACTS
from bot.commands.bound import NOT_BOUND
from bot.handoffs.brief import brief_from_answer
from bot.handoffs.views import BRIEF_LABEL, NOT_YOURS
from core.agent.assignment import AGENT_ACTIVATED, active_agent
from core.providers.scripted import Step
from core.providers.types import ToolCall
from core.sessions.tree import SessionTree
from fakediscord import Message
from fakediscord.interactions import InteractionHandle
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, persona_messages, settle, spawn

AGENTS: dict[str, Any] = {
    "scout": {
        "display_name": "Scout",
        "handoff_to": ["writer"],
        "tools": ["emit_artifact"],
        "artifact_types": ["note"],
    },
    "writer": {"display_name": "Writer", "user_startable": False},
}
EPHEMERAL = 1 << 6
AGENT_SETTINGS: dict[str, Any] = {"idle_evict_seconds": 60}
SCOUT_ANSWER = "Lisbon looks best."
BRIEF_ANSWER = "## Lisbon trip\nThree days, trains only."
BRIEF_INPUT = "Handoff from Scout — brief: Lisbon trip\n\nThree days, trains only."
WRITER_ANSWER = "Writing the Lisbon plan."


# -- helpers ---------------------------------------------------------------------------


def buttons(message: Message) -> dict[str, dict[str, Any]]:
    """Every button on a message, by custom_id."""
    found: dict[str, dict[str, Any]] = {}
    for row in message.components:
        for item in row.get("components") or ():
            if item.get("custom_id"):
                found[item["custom_id"]] = item
    return found


def has_button(prefix: str) -> Any:
    return lambda m: any(cid.startswith(prefix) for cid in buttons(m))


async def brief_message(bot: Bot, thread_id: int) -> Message:
    return await bot.fake.wait_for_message(thread_id, has_button("tb:brief:"))


async def offer_message(bot: Bot, thread_id: int) -> Message:
    return await bot.fake.wait_for_message(thread_id, has_button("tb:handoff:accept:"))


async def edited(handle: InteractionHandle, count: int = 1) -> None:
    """Wait until the press edited its message ``count`` times (the handler's last step)."""
    await handle.wait_for(lambda i: sum(r.kind == "edit_original" for r in i.responses) >= count)


async def refused(handle: InteractionHandle) -> str:
    """The ephemeral refusal a press got; asserts it was ephemeral."""
    response = await handle.wait_response()
    assert response.callback_type == 4
    assert int(response.body["data"].get("flags") or 0) & EPHEMERAL
    return str(response.body["data"]["content"])


def tree_of(bot: Bot, session_key: str) -> SessionTree:
    agent = bot.services.runtime.peek(session_key)
    assert agent is not None
    return agent.tree


def artifact_events(tree: SessionTree) -> list[Any]:
    return [e for e in tree.events if e.type.startswith("artifact.")]


async def scout_session(start_bot: StartBot, steps: list[Step], **options: Any) -> tuple[Bot, Any]:
    """Spawn Scout in a session thread; return once its first answer and the button are there."""
    options.setdefault("agents", AGENTS)
    bot = await start_bot(steps, **options)
    await spawn(bot, "plan a trip", agent="scout", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    return bot, record


async def press_brief(bot: Bot, record: Any, user: Any) -> tuple[InteractionHandle, Message]:
    thread_id = int(record.conversation.conversation_id)
    message = await brief_message(bot, thread_id)
    handle = await bot.fake.click_button(message, f"tb:brief:{record.binding_id}", user)
    offer = await offer_message(bot, thread_id)
    async with asyncio.timeout(TIMEOUT):
        await edited(handle, 2)
    return handle, offer


async def listed_agents(bot: Bot) -> str:
    """What /agents list answers alice."""
    w = bot.world
    handle = await bot.fake.invoke_command(w.guild, w.channel, w.alice, "agents list")
    async with asyncio.timeout(TIMEOUT):
        return str((await handle.wait_response()).body["data"]["content"])


# -- tests -----------------------------------------------------------------------------


class TestBriefAndAccept:
    async def test_owner_briefs_accepts_and_the_writer_takes_over(
        self, start_bot: StartBot
    ) -> None:
        """Brief button -> confirmed brief -> offer -> Accept -> Writer answers the brief here."""
        bot, record = await scout_session(
            start_bot,
            [Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER), Step(text=WRITER_ANSWER)],
            agent_settings=AGENT_SETTINGS,
        )
        key, thread_id = record.target_session_key, int(record.conversation.conversation_id)
        alice = bot.world.alice
        assert (await listed_agents(bot)).startswith(f"**Scout** `{key}` ")
        button = await brief_message(bot, thread_id)
        assert buttons(button)[f"tb:brief:{record.binding_id}"]["label"] == BRIEF_LABEL
        assert button.allowed_mentions == {"parse": []}
        (announced,) = [
            m for m in bot.fake.messages_in(thread_id) if "completed its task" in m.content
        ]
        assert announced.id < button.id  # the button comes under the task's announcement

        _, offer = await press_brief(bot, record, alice)
        tree = tree_of(bot, key)
        (brief,) = artifact_events(tree)
        conversation = [
            e.node_id
            for e in tree.path()
            if e.type in ("user_message", "assistant_message")
            and e.payload.get("text") in ("plan a trip", SCOUT_ANSWER)
        ]
        assert brief.type == "artifact.brief"
        assert brief.payload["data"] == {
            "title": "Lisbon trip",
            "summary": "Three days, trains only.",
            "next_agent": "writer",
        }
        assert brief.payload["confirmed_by"] == str(alice.id)
        assert (brief.payload["produced_by"], brief.payload["agent"]) == ("system", "scout")
        assert brief.payload["origin"] == conversation
        (handoff,) = await bot.services.handoffs.list(key)
        assert (handoff.status, handoff.from_agent, handoff.to_agent) == (
            "offered",
            "scout",
            "writer",
        )
        assert handoff.artifact_id == brief.payload["artifact_id"]
        assert set(buttons(offer)) == {
            f"tb:handoff:accept:{handoff.id}",
            f"tb:handoff:reject:{handoff.id}",
        }
        assert offer.allowed_mentions == {"parse": []}
        pressed = bot.fake.message(button.id)
        assert all(b.get("disabled") for b in buttons(pressed).values())
        assert pressed.content == (  # what happened: alice asked, Scout wrote it
            f"Scout wrote the brief <@{alice.id}> asked for: **Lisbon trip**. "
            "The handoff to Writer is offered below."
        )
        assert "confirmed" not in pressed.content

        handle = await bot.fake.click_button(offer, f"tb:handoff:accept:{handoff.id}", alice)
        async with asyncio.timeout(TIMEOUT):
            await edited(handle)
        await settle(bot, key)

        (done,) = await bot.services.handoffs.list(key)
        assert done.status == "completed"  # accepted, then completed once Writer answered
        statuses = [e.type for e in tree_of(bot, key).events if e.type.startswith("handoff.")]
        assert statuses == ["handoff.offered", "handoff.accepted", "handoff.completed"]
        agent = await bot.services.runtime.get(key)
        assert active_agent(agent.tree) == "writer"
        assert agent.agent_name == "writer"
        assert bot.binding().metadata["persona"] == {"name": "Writer", "avatar_url": None}
        last = persona_messages(bot.fake, thread_id)[-1]
        assert (last.username, last.content) == ("Writer", WRITER_ANSWER)
        assert bot.provider.calls[2][-1].content == BRIEF_INPUT
        assert bot.provider.calls[1][-1].content.startswith("Write the brief for Writer:")
        settled = bot.fake.message(offer.id)
        assert all(b.get("disabled") for b in buttons(settled).values())
        assert f"Accepted by <@{alice.id}>" in settled.content
        assert len(bot.services.bindings.live()) == 1  # the same thread, no new one

        listed = await listed_agents(bot)
        assert listed.startswith(f"**Writer** (handed over from Scout) `{key}` idle")
        bot.services.runtime.evict_idle()  # (nothing idle long enough yet)
        await bot.clock.advance(AGENT_SETTINGS["idle_evict_seconds"])
        assert bot.services.runtime.evict_idle() == [key]
        assert (await listed_agents(bot)).startswith(f"**Writer** (handed over from Scout) `{key}`")

    async def test_artifacts_command_lists_the_brief(self, start_bot: StartBot) -> None:
        """/artifacts lists the session's artifacts ephemerally; elsewhere it says why not."""
        bot, record = await scout_session(
            start_bot, [Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER)]
        )
        w, thread_id = bot.world, int(record.conversation.conversation_id)
        empty = await bot.fake.invoke_command(w.guild, thread_id, w.alice, "artifacts")
        assert (await empty.wait_response()).body["data"]["content"] == NO_ARTIFACTS
        await press_brief(bot, record, w.alice)
        (brief,) = artifact_events(tree_of(bot, record.target_session_key))
        handle = await bot.fake.invoke_command(w.guild, thread_id, w.alice, "artifacts")
        data = (await handle.wait_response()).body["data"]
        assert data["flags"] & EPHEMERAL
        assert data["allowed_mentions"] == {"parse": []}
        assert f"`brief` `{brief.payload['artifact_id'][:8]}`" in data["content"]
        assert "by system (scout)" in data["content"]
        assert f"confirmed by <@{w.alice.id}>" in data["content"]
        assert "2 origin node(s)" in data["content"]
        assert "Lisbon trip" in data["content"]
        outside = await bot.fake.invoke_command(w.guild, w.channel, w.alice, "artifacts")
        assert (await outside.wait_response()).body["data"]["content"] == NOT_BOUND


class TestWhoMayPress:
    async def test_others_are_refused_and_an_admin_may_reject(self, start_bot: StartBot) -> None:
        """Bob's presses change nothing; the admin's Reject rejects and activates nobody."""
        bot, record = await scout_session(
            start_bot, [Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER)]
        )
        key, thread_id = record.target_session_key, int(record.conversation.conversation_id)
        w = bot.world
        bob = bot.fake.add_member(w.guild, "bob")
        button = await brief_message(bot, thread_id)

        handle = await bot.fake.click_button(button, f"tb:brief:{record.binding_id}", bob)
        assert await refused(handle) == NOT_YOURS
        assert artifact_events(tree_of(bot, key)) == []
        assert await bot.services.handoffs.list(key) == []
        assert len(bot.provider.calls) == 1

        _, offer = await press_brief(bot, record, w.alice)
        (handoff,) = await bot.services.handoffs.list(key)
        for action in ("accept", "reject"):
            handle = await bot.fake.click_button(offer, f"tb:handoff:{action}:{handoff.id}", bob)
            assert await refused(handle) == NOT_YOURS
        assert [h.status for h in await bot.services.handoffs.list(key)] == ["offered"]
        assert active_agent(tree_of(bot, key)) == "scout"

        events_before = len(tree_of(bot, key).events)
        handle = await bot.fake.click_button(offer, f"tb:handoff:reject:{handoff.id}", w.admin)
        async with asyncio.timeout(TIMEOUT):
            await edited(handle)
        assert [h.status for h in await bot.services.handoffs.list(key)] == ["rejected"]
        tree = tree_of(bot, key)
        assert [e.type for e in tree.events[events_before:]] == ["handoff.rejected"]
        assert active_agent(tree) == "scout"
        assert len(bot.provider.calls) == 2  # nobody was started
        settled = bot.fake.message(offer.id)
        assert f"Rejected by <@{w.admin.id}>" in settled.content
        assert all(b.get("disabled") for b in buttons(settled).values())

        again = await bot.fake.click_button(offer, f"tb:handoff:accept:{handoff.id}", w.alice)
        assert "is rejected" in await _followup_text(again)
        assert active_agent(tree_of(bot, key)) == "scout"


async def _followup_text(handle: InteractionHandle) -> str:
    (followup,) = await handle.wait_followups(1)
    assert int(followup.body.get("flags") or 0) & EPHEMERAL
    return str(followup.body["content"])


class TestRestart:
    async def test_buttons_work_after_a_restart(self, start_bot: StartBot) -> None:
        """The brief button and Accept posted before a restart still work after it, once."""
        first, record = await scout_session(start_bot, [Step(text=SCOUT_ANSWER)])
        thread_id = int(record.conversation.conversation_id)
        button = await brief_message(first, thread_id)
        await first.client.close()
        await first.services.close()

        second = await start_bot([Step(text=BRIEF_ANSWER), Step(text=WRITER_ANSWER)], agents=AGENTS)
        key = record.target_session_key
        handle = await second.fake.click_button(
            button, f"tb:brief:{record.binding_id}", second.world.alice
        )
        offer = await offer_message(second, thread_id)
        async with asyncio.timeout(TIMEOUT):
            await edited(handle, 2)
        (handoff,) = await second.services.handoffs.list(key)
        handle = await second.fake.click_button(
            offer, f"tb:handoff:accept:{handoff.id}", second.world.alice
        )
        async with asyncio.timeout(TIMEOUT):
            await edited(handle)
        await settle(second, key)
        last = persona_messages(second.fake, thread_id)[-1]
        assert (last.username, last.content) == ("Writer", WRITER_ANSWER)
        assert second.provider.calls[1][-1].content == BRIEF_INPUT
        briefs = [m for m in second.fake.messages_in(thread_id) if has_button("tb:brief:")(m)]
        assert len(briefs) == 1  # not posted again by the restarted bot

    async def test_a_button_missed_by_a_stopped_bot_is_posted_after_the_restart(
        self, start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The task was announced, the process stopped before the button: the restart posts it."""
        import bot.handoffs.brief
        import bot.handoffs.views

        async def nothing(*_args: Any) -> None:
            return None

        for module in (bot.handoffs.brief, bot.handoffs.views):  # this process posts none
            monkeypatch.setattr(module, "offer_brief", nothing)
        first, record = await scout_session(start_bot, [Step(text=SCOUT_ANSWER)])
        await first.services.subagents.wait_settled()
        thread_id = int(record.conversation.conversation_id)
        assert not [m for m in first.fake.messages_in(thread_id) if has_button("tb:brief:")(m)]
        await first.client.close()
        await first.services.close()
        monkeypatch.undo()

        second = await start_bot([], agents=AGENTS)
        button = await brief_message(second, thread_id)
        async with asyncio.timeout(TIMEOUT):
            await second.client.account.drain()
        briefs = [m for m in second.fake.messages_in(thread_id) if has_button("tb:brief:")(m)]
        assert [m.id for m in briefs] == [button.id]


class TestSystemOnly:
    async def test_the_model_cannot_emit_a_brief_but_the_button_can(
        self, start_bot: StartBot
    ) -> None:
        """emit_artifact type=brief is an error result with no event; the button records one."""
        emit = ToolCall(
            id="c1",
            name="emit_artifact",
            arguments=json.dumps(
                {"type": "brief", "data": {"title": "t", "summary": "s"}, "origin": ["x"]}
            ),
        )
        bot, record = await scout_session(
            start_bot,
            [Step(tool_calls=(emit,)), Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER)],
        )
        key = record.target_session_key
        tree = tree_of(bot, key)
        (result,) = [e for e in tree.events if e.type == "tool_result"]
        assert result.payload["is_error"] is True
        assert "system-only" in result.payload["content"]
        assert artifact_events(tree) == []
        assert [e.type for e in tree.events if e.type == AGENT_ACTIVATED] == [AGENT_ACTIVATED]

        await press_brief(bot, record, bot.world.alice)
        (brief,) = artifact_events(tree_of(bot, key))
        assert brief.type == "artifact.brief"
        assert brief.payload["confirmed_by"] == str(bot.world.alice.id)


class TestBriefFailure:
    async def test_an_empty_answer_gives_the_button_back(self, start_bot: StartBot) -> None:
        """No brief from an empty consolidation answer; the button works again afterwards."""
        bot, record = await scout_session(
            start_bot, [Step(text=SCOUT_ANSWER), Step(text=""), Step(text=BRIEF_ANSWER)]
        )
        key, thread_id = record.target_session_key, int(record.conversation.conversation_id)
        button = await brief_message(bot, thread_id)
        custom_id = f"tb:brief:{record.binding_id}"
        handle = await bot.fake.click_button(button, custom_id, bot.world.alice)
        assert "gave no answer" in await _followup_text(handle)
        async with asyncio.timeout(TIMEOUT):
            await edited(handle, 2)
        restored = bot.fake.message(button.id)
        assert not buttons(restored)[custom_id].get("disabled")
        assert artifact_events(tree_of(bot, key)) == []
        assert await bot.services.handoffs.list(key) == []

        await press_brief(bot, record, bot.world.alice)
        assert len(artifact_events(tree_of(bot, key))) == 1


class TestNewThread:
    async def test_handoff_thread_new_moves_the_session(self, start_bot: StartBot) -> None:
        """With handoff_thread = "new" the Writer takes over in a new thread; the old one ends."""
        agents = {**AGENTS, "writer": {**AGENTS["writer"], "handoff_thread": "new"}}
        bot, record = await scout_session(
            start_bot,
            [Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER), Step(text=WRITER_ANSWER)],
            agents=agents,
        )
        key, old_thread = record.target_session_key, int(record.conversation.conversation_id)
        _, offer = await press_brief(bot, record, bot.world.alice)
        (handoff,) = await bot.services.handoffs.list(key)
        handle = await bot.fake.click_button(
            offer, f"tb:handoff:accept:{handoff.id}", bot.world.alice
        )
        async with asyncio.timeout(TIMEOUT):
            await edited(handle)
        await settle(bot, key)

        (now,) = bot.services.bindings.live()
        new_thread = int(now.conversation.conversation_id)
        assert new_thread != old_thread
        assert now.target_session_key == key
        assert now.bound_by == record.bound_by
        assert now.metadata["persona"]["name"] == "Writer"
        assert bot.fake.channel(new_thread).parent_id == bot.world.channel.id
        (answer,) = persona_messages(bot.fake, new_thread)
        assert (answer.username, answer.content) == ("Writer", WRITER_ANSWER)
        assert all(m.username != "Writer" for m in persona_messages(bot.fake, old_thread))
        assert f"takes over in <#{new_thread}>" in bot.fake.message(offer.id).content
        assert bot.provider.calls[2][-1].content == BRIEF_INPUT
        farewell = bot.fake.messages_in(old_thread)[-1]
        assert farewell.content.startswith("This thread is no longer bound to its agent")


class TestBriefFromAnswer:
    def test_title_and_summary(self) -> None:
        """Title: the first non-empty line, markdown stripped; summary: the rest, or the title."""
        brief = brief_from_answer("\n# **Lisbon**\n\nthree days\ntrains", next_agent="writer")
        assert (brief.title, brief.summary, brief.next_agent) == (
            "Lisbon",
            "three days\ntrains",
            "writer",
        )
        only = brief_from_answer("Just a title", next_agent=None)
        assert (only.title, only.summary) == ("Just a title", "Just a title")
