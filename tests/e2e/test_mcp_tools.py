"""Agents with MCP tools, end to end: the real bot, the fake Discord, real MCP servers.

``mcp-server-time`` (from the package registry) and the project's test server
``tests/mcp_servers/toolbox.py`` run as stdio subprocesses; the model is
scripted. What a user sees is asserted in the thread: the compact tool lines,
the approval buttons and what becomes of them, the notices; what the model
sees is asserted in its next request.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.app import shut_down
from core.errors import ConfigError
from core.inbox import InboxPress
from core.providers.scripted import Step
from core.providers.types import ChatMessage, ToolCall
from fakediscord.models import Message
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import (
    TIMEOUT,
    assert_pings_nobody,
    persona_messages,
    run,
    settle,
    spawn,
    status_line,
)

TOOLBOX = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "toolbox.py")
CLOCK = {"command": [sys.executable, "-m", "mcp_server_time"]}
NOW_IN_PARIS = ToolCall(
    id="t1", name="clock__get_current_time", arguments='{"timezone": "Europe/Paris"}'
)
CONVERT = ToolCall(
    id="t2",
    name="clock__convert_time",
    arguments='{"source_timezone": "Europe/Paris", "time": "12:00", '
    '"target_timezone": "Asia/Tokyo"}',
)


def call_then_answer(call: ToolCall, answer: str = "all done") -> Any:
    """Call ``call`` for a user message, then answer once its result is in."""

    def script(messages: list[ChatMessage]) -> Step:
        if messages[-1].role == "user":
            return Step(text="Let me check.", tool_calls=(call,))
        return Step(text=answer)

    return script


def tool_result(bot: Bot, call_id: str) -> str:
    """What the model read for ``call_id`` in its latest request."""
    for messages in reversed(bot.provider.calls):
        for message in messages:
            if message.role == "tool" and message.tool_call_id == call_id:
                return message.content or ""
    raise AssertionError(f"no result for {call_id} reached the model")


def buttons(message: Message) -> list[str]:
    return [
        item["custom_id"]
        for row in message.components
        for item in row.get("components") or ()
        if item.get("custom_id")
    ]


async def approval_message(bot: Bot, thread: int) -> Message:
    async with asyncio.timeout(TIMEOUT):
        return await bot.fake.wait_for_message(
            thread, lambda m: any(c.startswith("tb:approval:") for c in buttons(m))
        )


async def edited_to(bot: Bot, thread: int, message_id: int, needle: str) -> Message:
    """Wait until the message says ``needle`` (and return it)."""

    def probe() -> Message | None:
        found = [m for m in bot.fake.messages_in(thread) if m.id == message_id]
        return found[0] if found and needle in found[0].content else None

    async with asyncio.timeout(TIMEOUT):
        return await bot.fake.state.changed.wait_for(probe)


async def session_thread(bot: Bot, task: str = "what time is it") -> tuple[str, int]:
    await spawn(bot, task, mode="session")
    record = bot.binding()
    return record.target_session_key, int(record.conversation.conversation_id)


async def waiting_line(bot: Bot, thread: int) -> Message:
    """The persona message whose line says the call waits for approval."""
    async with asyncio.timeout(TIMEOUT):
        return await bot.fake.wait_for_message(
            thread,
            lambda m: m.webhook_id is not None and "⏸️ waiting for approval" in m.content,
        )


def call_lines(bot: Bot, thread: int, name: str) -> list[tuple[int, str]]:
    """Every line naming the call ``name`` in the thread's persona messages, with its message."""
    return [
        (m.id, line)
        for m in persona_messages(bot.fake, thread)
        for line in m.content.splitlines()
        if f"`{name}`" in line
    ]


def press(bot: Bot, message: Message, action: str, user: Any) -> Any:
    (custom_id,) = [c for c in buttons(message) if c.startswith(f"tb:approval:{action}:")]
    return bot.fake.click_button(message, custom_id, user)


class TestToolCalls:
    async def test_a_real_tool_result_reaches_the_model_and_the_thread_shows_the_call(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot(
            call_then_answer(NOW_IN_PARIS, "It is lunchtime in Paris."),
            mcp_servers={"clock": CLOCK},
            agent_settings={"tools": ["mcp:clock"]},
        )
        key, thread = await session_thread(bot)
        await settle(bot, key)

        result = json.loads(tool_result(bot, "t1"))
        assert result["timezone"] == "Europe/Paris"
        assert "datetime" in result
        offered = {spec.name for spec in bot.provider.tools_seen[0]}
        assert offered == {"clock__get_current_time", "clock__convert_time"}
        spoken = "\n".join(m.content for m in persona_messages(bot.fake, thread))
        assert "-# 🔧 `clock__get_current_time` · timezone: Europe/Paris · ✅ ok" in spoken
        (line,) = [text for _, text in call_lines(bot, thread, "clock__get_current_time")]
        assert line.startswith(
            "-# 🔧 `clock__get_current_time` · timezone: Europe/Paris · ✅ ok → "
            "timezone: Europe/Paris, datetime: "
        )  # the result, shortened
        assert "It is lunchtime in Paris." in spoken
        assert_pings_nobody(bot.fake)

    async def test_show_tool_calls_off_hides_the_lines(self, start_bot: StartBot) -> None:
        bot = await start_bot(
            call_then_answer(NOW_IN_PARIS),
            mcp_servers={"clock": CLOCK},
            agent_settings={"tools": ["mcp:clock/get_current_time"]},
            discord_settings={"show_tool_calls": "off"},
        )
        key, thread = await session_thread(bot)
        await settle(bot, key)

        assert [s.name for s in bot.provider.tools_seen[0]] == ["clock__get_current_time"]
        spoken = [m.content for m in persona_messages(bot.fake, thread)]
        assert not any("🔧" in text for text in spoken)
        assert "all done" in spoken[-1]

    async def test_an_oversized_result_is_cut_with_a_marker(self, start_bot: StartBot) -> None:
        big = ToolCall(id="b1", name="toolbox__big", arguments='{"n": 50000}')
        bot = await start_bot(
            call_then_answer(big),
            mcp_servers={"toolbox": {"command": [sys.executable, TOOLBOX]}},
            agent_settings={"tools": ["mcp:toolbox"], "tool_result_max_chars": 20000},
        )
        key, _ = await session_thread(bot)
        await settle(bot, key)

        seen = tool_result(bot, "b1")
        assert seen.startswith("x" * 20000)
        assert "[cut: the result had 50,000 characters; the first 20,000 are shown]" in seen
        assert len(seen) < 20200


class TestFailingServers:
    async def test_a_server_killed_mid_call_gives_an_error_a_notice_and_comes_back(
        self, start_bot: StartBot
    ) -> None:
        die = ToolCall(id="d1", name="toolbox__die", arguments="{}")
        echo = ToolCall(id="e1", name="toolbox__echo", arguments='{"text": "back again"}')

        def script(messages: list[ChatMessage]) -> Step:
            last = messages[-1]
            if last.role == "user" and "second" in (last.content or ""):
                return Step(tool_calls=(echo,))
            if last.role == "user":
                return Step(tool_calls=(die,))
            return Step(text="noted")

        bot = await start_bot(
            script,
            mcp_servers={"toolbox": {"command": [sys.executable, TOOLBOX]}},
            agent_settings={"tools": ["mcp:toolbox"]},
        )
        key, thread = await session_thread(bot, "first")
        await settle(bot, key)

        assert tool_result(bot, "d1").startswith("error:")
        notices = [m.content for m in bot.fake.messages_in(thread) if "🔌" in m.content]
        assert len(notices) == 1
        assert "toolbox" in notices[0]

        agent = await bot.services.runtime.get(key)
        await agent.send("second")
        await settle(bot, key)
        assert "back again" in tool_result(bot, "e1")

    async def test_a_hung_server_times_out_on_the_bot_clock(self, start_bot: StartBot) -> None:
        hang = ToolCall(id="h1", name="toolbox__wait", arguments='{"seconds": 3600}')
        bot = await start_bot(
            call_then_answer(hang),
            mcp_servers={"toolbox": {"command": [sys.executable, TOOLBOX], "timeout_seconds": 7}},
            agent_settings={"tools": ["mcp:toolbox"]},
        )
        key, thread = await session_thread(bot)
        async with asyncio.timeout(TIMEOUT):
            await bot.fake.wait_for_message(thread, lambda m: "toolbox__wait" in m.content)
            await bot.clock.wait_for_sleepers(1)
        await bot.clock.advance(7)
        await settle(bot, key)

        assert tool_result(bot, "h1").startswith("error:")
        notices = [m.content for m in bot.fake.messages_in(thread) if "toolbox" in m.content]
        assert any("7 s" in text for text in notices)

    async def test_cancel_stops_a_call_in_flight(self, start_bot: StartBot) -> None:
        hang = ToolCall(id="h1", name="toolbox__wait", arguments='{"seconds": 3600}')
        bot = await start_bot(
            call_then_answer(hang),
            mcp_servers={"toolbox": {"command": [sys.executable, TOOLBOX]}},
            agent_settings={"tools": ["mcp:toolbox"]},
        )
        key, thread = await session_thread(bot)
        async with asyncio.timeout(TIMEOUT):
            await bot.fake.wait_for_message(thread, lambda m: "toolbox__wait" in m.content)
            await bot.clock.wait_for_sleepers(1)  # the call's timeout timer: it is in flight

        reply = await run(bot, bot.world.alice, "cancel", thread)
        assert "cancel" in reply.body["data"]["content"].lower()
        await settle(bot, key)
        agent = await bot.services.runtime.get(key)
        types = [e.type for e in agent.tree.events]
        assert "turn_cancelled" in types
        assert "turn_ended" not in types
        assert len(bot.provider.calls) == 1  # the model was not called again
        ((_, line),) = call_lines(bot, thread, "toolbox__wait")
        assert line.endswith("· ⏹️ cancelled by @alice")  # not "…" for good: who cut it
        assert status_line(bot.fake, thread).startswith("Status: ⏹️ Cancelled by @alice")
        (cancel,) = [e.payload for e in agent.tree.events if e.type == "turn_cancelled"]
        alice = bot.world.alice
        assert (cancel["by_user_id"], cancel["by_name"]) == (str(alice.id), "alice")


APPROVE_CONVERT = {"command": CLOCK["command"], "require_approval": ["convert_time"]}


async def waiting_for_approval(start_bot: StartBot, **options: Any) -> tuple[Bot, str, int]:
    options.setdefault("mcp_servers", {"clock": APPROVE_CONVERT})
    options.setdefault("agent_settings", {"tools": ["mcp:clock"]})
    bot = await start_bot(call_then_answer(CONVERT, "Converted."), **options)
    key, thread = await session_thread(bot, "noon in Paris, in Tokyo?")
    return bot, key, thread


class TestApprovals:
    async def test_allow_runs_the_call_and_says_who_allowed_it(self, start_bot: StartBot) -> None:
        bot, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(bot, thread)
        assert "clock__convert_time" in message.content
        assert len(bot.provider.calls) == 1
        waiting = await waiting_line(bot, thread)

        handle = await press(bot, message, "allow", bot.world.alice)
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_response()
        shown = await edited_to(bot, thread, message.id, "allowed by")
        await settle(bot, key)

        assert buttons(shown) == []
        assert json.loads(tool_result(bot, "t2"))["target"]["timezone"] == "Asia/Tokyo"
        agent = await bot.services.runtime.get(key)
        (decided,) = [e for e in agent.tree.events if e.type == "approval.decided"]
        assert decided.payload["decision"] == "allow"
        assert decided.payload["by_user_id"] == str(bot.world.alice.id)
        spoken = "\n".join(m.content for m in persona_messages(bot.fake, thread))
        assert "clock__convert_time" in spoken
        assert "✅ ok" in spoken
        # One line for the call, edited in place in the message that showed it waiting.
        ((message_id, line),) = call_lines(bot, thread, "clock__convert_time")
        assert message_id == waiting.id
        assert "· ✅ ok → source: " in line
        assert "waiting" not in line
        assert_pings_nobody(bot.fake)

    async def test_deny_tells_the_model_and_runs_nothing(self, start_bot: StartBot) -> None:
        bot, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(bot, thread)
        waiting = await waiting_line(bot, thread)

        handle = await press(bot, message, "deny", bot.world.alice)
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_response()
        await edited_to(bot, thread, message.id, "denied by")
        await settle(bot, key)

        assert tool_result(bot, "t2").startswith("denied by alice")
        ((message_id, line),) = call_lines(bot, thread, "clock__convert_time")
        assert message_id == waiting.id
        assert line.endswith("· ⛔ denied")

    async def test_a_member_who_does_not_own_the_session_is_refused(
        self, start_bot: StartBot
    ) -> None:
        bot, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(bot, thread)
        mallory = bot.fake.add_member(bot.world.guild, "mallory")

        handle = await press(bot, message, "allow", mallory)
        async with asyncio.timeout(TIMEOUT):
            response = await handle.wait_response()
        assert response.callback_type == 4
        assert "Only the person who started this session" in response.body["data"]["content"]
        assert int(response.body["data"].get("flags") or 0) & 64
        agent = await bot.services.runtime.get(key)
        assert [p.tool_call_id for p in agent.tree.pending_approvals] == ["t2"]

        handle = await press(bot, message, "deny", bot.world.admin)
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_response()
        await settle(bot, key)
        assert tool_result(bot, "t2").startswith("denied by")

    async def test_no_answer_in_time_is_a_denial(self, start_bot: StartBot) -> None:
        bot, key, thread = await waiting_for_approval(
            start_bot, agent_settings={"tools": ["mcp:clock"], "approval_timeout_seconds": 60}
        )
        message = await approval_message(bot, thread)
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers(1)
        await bot.clock.advance(60)
        shown = await edited_to(bot, thread, message.id, "nobody answered")
        await settle(bot, key)

        assert buttons(shown) == []
        assert "nobody approved" in tool_result(bot, "t2")

    async def test_a_steer_withdraws_the_request_and_takes_the_buttons_away(
        self, start_bot: StartBot
    ) -> None:
        bot, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(bot, thread)
        waiting = await waiting_line(bot, thread)

        gate = bot.fake.hold("PATCH", f"/channels/{thread}/messages/{message.id}")
        await run(bot, bot.world.alice, "steer", thread, message="never mind, just say hi")
        late = await press(bot, message, "allow", bot.world.alice)  # before the edit lands
        async with asyncio.timeout(TIMEOUT):
            response = await late.wait_response()
        assert response.body["data"]["content"] == (
            "Already decided: withdrawn: the turn moved on."
        )
        gate.release()
        shown = await edited_to(bot, thread, message.id, "withdrawn")
        await settle(bot, key)

        assert buttons(shown) == []
        assert "withdrawn" in tool_result(bot, "t2")
        # (the scripted model calls again after the steer: that call has a line of its own)
        message_id, line = call_lines(bot, thread, "clock__convert_time")[0]
        assert message_id == waiting.id
        assert line.endswith("· ↩️ withdrawn")

    async def test_cancel_withdraws_the_request_and_takes_the_buttons_away(
        self, start_bot: StartBot
    ) -> None:
        bot, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(bot, thread)
        waiting = await waiting_line(bot, thread)

        await run(bot, bot.world.alice, "cancel", thread)
        shown = await edited_to(bot, thread, message.id, "cancelled by")
        await settle(bot, key)

        assert buttons(shown) == []
        assert shown.content.endswith(": ⏹️ cancelled by @alice")  # not "the turn moved on"
        agent = await bot.services.runtime.get(key)
        decided = [e.payload for e in agent.tree.events if e.type == "approval.decided"]
        assert [(d["decision"], d["reason"], d["by_name"]) for d in decided] == [
            ("withdrawn", "cancel", "alice")
        ]
        assert len(bot.provider.calls) == 1
        ((message_id, line),) = call_lines(bot, thread, "clock__convert_time")
        assert message_id == waiting.id
        assert line.endswith("· ⏹️ cancelled by @alice")

    async def test_the_buttons_work_after_a_restart_and_run_the_call_once(
        self, start_bot: StartBot
    ) -> None:
        first, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(first, thread)
        await first.client.close()
        await first.services.close()

        second = await start_bot(
            call_then_answer(CONVERT, "Converted after the restart."),
            mcp_servers={"clock": APPROVE_CONVERT},
            agent_settings={"tools": ["mcp:clock"]},
        )
        gate = second.fake.hold("PATCH", f"/channels/{thread}/messages/{message.id}")
        handle = await press(second, message, "allow", second.world.alice)
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_response()
        again = await press(second, message, "deny", second.world.alice)
        async with asyncio.timeout(TIMEOUT):
            response = await again.wait_response()
        assert response.body["data"]["content"] == "Already decided: allowed by alice."
        gate.release()
        await edited_to(second, thread, message.id, "allowed by")
        await settle(second, key)

        assert json.loads(tool_result(second, "t2"))["target"]["timezone"] == "Asia/Tokyo"
        agent = await second.services.runtime.get(key)
        types = [e.type for e in agent.tree.events]
        assert types.count("approval.requested") == 1
        assert types.count("tool_result") == 1
        assert "turn_interrupted" not in types
        requests = [m for m in second.fake.messages_in(thread) if buttons(m) or "🔐" in m.content]
        assert len(requests) == 1  # the restarted bot found its request, did not ask again

    @pytest.mark.parametrize("how", ["closed", "stopped"])
    async def test_after_a_restart_the_waiting_line_is_edited_in_place_not_written_again(
        self, start_bot: StartBot, how: str
    ) -> None:
        """Allow pressed after a restart (a crash-like close, or a clean stop): the line that
        said "waiting" says how the call went, in its message; no second line is posted."""
        first, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(first, thread)
        waiting = await waiting_line(first, thread)
        await first.client.account.drain()
        if how == "stopped":
            async with asyncio.timeout(TIMEOUT):
                await shut_down(first.services, [first.client], drain_seconds=30)
        await first.client.close()
        await first.services.close()

        second = await start_bot(
            call_then_answer(CONVERT, "Converted after the restart."),
            mcp_servers={"clock": APPROVE_CONVERT},
            agent_settings={"tools": ["mcp:clock"]},
        )
        handle = await press(second, message, "allow", second.world.alice)
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_response()
        await edited_to(second, thread, waiting.id, "✅ ok")
        await settle(second, key)
        await second.client.account.drain()

        ((message_id, line),) = call_lines(second, thread, "clock__convert_time")
        assert message_id == waiting.id
        assert "· ✅ ok → source: " in line
        spoken = [m.content for m in persona_messages(second.fake, thread)]
        assert "Converted after the restart." in spoken[-1]

    async def test_a_press_a_killed_process_was_recording_counts_after_the_restart(
        self, start_bot: StartBot
    ) -> None:
        """Allow was pressed and recorded, and the process died before the decision: the
        next start applies it (a person's decision is not lost to a crash)."""
        first, key, thread = await waiting_for_approval(start_bot)
        message = await approval_message(first, thread)
        agent = await first.services.runtime.get(key)
        (request,) = [e for e in agent.tree.events if e.type == "approval.requested"]
        await first.client.close()
        await first.services.inbox.record_press(
            InboxPress(
                conversation=first.binding().conversation,
                item_id="1",
                seq=1,
                action="approval:allow",
                target=request.node_id,
                message_id=str(message.id),
                author_id=str(first.world.alice.id),
                author_name="alice",
            )
        )
        await first.services.close()

        second = await start_bot(
            call_then_answer(CONVERT, "Converted after the restart."),
            mcp_servers={"clock": APPROVE_CONVERT},
            agent_settings={"tools": ["mcp:clock"]},
        )
        await edited_to(second, thread, message.id, "allowed by alice")
        await settle(second, key)
        assert json.loads(tool_result(second, "t2"))["target"]["timezone"] == "Asia/Tokyo"
        assert await second.services.inbox.pending_presses("discord", "default") == []


class TestStartUp:
    async def test_an_unknown_tool_name_stops_start_up_with_one_line(
        self, start_bot: StartBot
    ) -> None:
        with pytest.raises(ConfigError) as caught:
            await start_bot(
                mcp_servers={"clock": {**CLOCK, "require_approval": ["convert_tme"]}},
                agent_settings={"tools": ["mcp:clock"]},
            )
        message = str(caught.value)
        assert "\n" not in message
        assert "mcp_servers.clock" in message
        assert "unknown tool 'convert_tme'" in message
