"""Threads bound to an external agent over ACP, end to end: the real discord.py client
against the fake Discord, the real SDK on both sides, the tests' scripted agent as a
real process (``tests/acp_agents/scripted.py``; a word in the message picks its path).

What people see is asserted in the thread: the persona's streamed words, the tool
and plan lines, a long diff as a file, the permission buttons in the agent's own
words and what becomes of them, the notices; and the completion, announced once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from adapters.discord.approvals import approval_view
from bot.app import shut_down
from bot.commands.permissions import NOT_OWNER
from core.acp.process import workspace_name
from core.providers.scripted import Step
from core.sessions.log import as_item
from core.sessions.payloads import ApprovalOption, ApprovalRequestedPayload, TurnStartedPayload
from fakediscord.models import Message
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import (
    ANNOUNCED,
    TIMEOUT,
    assert_pings_nobody,
    content,
    done,
    ephemeral,
    persona_messages,
    run,
    settle,
    spawn,
    status_line,
    text_messages,
    tool_lines,
)
from tests.e2e.test_handoffs import press_brief, scout_session
from tests.fixtures.acp import acp_tables, prompts_received

FAILED = "⚠️ This turn failed"


async def acp_bot(start_bot: StartBot, **options: Any) -> Bot:
    tables = acp_tables(**{k: options.pop(k) for k in ("command", "no_load") if k in options})
    return await start_bot(agents=tables["agents"], acp_agents=tables["acp_agents"], **options)


async def coder_thread(bot: Bot, task: str, mode: str = "session") -> tuple[str, int]:
    """Spawn ``agent:coder`` with ``task``; its session key and thread."""
    await spawn(bot, task, mode=mode, agent="coder")
    record = bot.binding()
    return record.target_session_key, int(record.conversation.conversation_id)


def workspace(bot: Bot, key: str) -> Path:
    """The session's own directory, where the scripted agent keeps what it received."""
    return bot.services.config.acp_workspace_root("scripted") / workspace_name(key)


def spoken(bot: Bot, thread: int) -> str:
    return "\n".join(m.content for m in persona_messages(bot.fake, thread))


def buttons(message: Message) -> list[dict[str, Any]]:
    return [item for row in message.components for item in row.get("components") or ()]


async def approval_message(bot: Bot, thread: int) -> Message:
    async with asyncio.timeout(TIMEOUT):
        return await bot.fake.wait_for_message(
            thread,
            lambda m: any(str(b.get("custom_id")).startswith("tb:approval:") for b in buttons(m)),
        )


async def edited_to(bot: Bot, thread: int, message_id: int, needle: str) -> Message:
    def probe() -> Message | None:
        found = bot.fake.message(message_id)
        return found if needle in found.content else None

    async with asyncio.timeout(TIMEOUT):
        return await bot.fake.state.changed.wait_for(probe)


async def press(bot: Bot, message: Message, label: str, user: Any) -> Any:
    (custom_id,) = [b["custom_id"] for b in buttons(message) if b.get("label") == label]
    handle = await bot.fake.click_button(message, custom_id, user)
    async with asyncio.timeout(TIMEOUT):
        return await handle.wait_response()


async def said_in(bot: Bot, thread: int, needle: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        await bot.fake.wait_for_message(thread, lambda m: needle in m.content)


class TestAThreadBoundToAnExternalAgent:
    async def test_words_tool_line_and_plan_stream_under_the_persona(
        self, start_bot: StartBot
    ) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "a plan and a tool")
        await settle(bot, key)

        assert bot.binding().target_kind == "acp"
        personas = persona_messages(bot.fake, thread)
        assert {m.username for m in personas} == {"Coder"}
        text = spoken(bot, thread)
        assert "echo: a plan and a tool" in text
        assert "-# 🔧 `run ls` · ✅ ok → notes.txt plan.md" in text
        (plan,) = [m.content for m in text_messages(bot.fake, thread) if "📋" in m.content]
        assert plan == "📋 **Plan** (1/2 done): ✅ read the code · ⬜ write the fix"
        assert status_line(bot.fake, thread).startswith("Status: ✅ idle")
        assert "secret" not in text  # no thought is ever posted
        assert_pings_nobody(bot.fake)

    async def test_a_command_reported_only_in_raw_output_shows_and_keeps_its_output(
        self, start_bot: StartBot
    ) -> None:
        """As Codex's adapter reports a command: its output only in ``rawOutput``."""
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "run it as codex does")
        await settle(bot, key)
        await bot.fake.user_says(thread, bot.world.alice, "now codex with a fail")
        await said_in(bot, thread, "echo: now codex with a fail")
        await settle(bot, key)

        text = spoken(bot, thread)
        assert "-# 🔧 `List files` · ✅ ok → notes.txt plan.md" in text
        assert "-# 🔧 `Run ls nope` · ⚠️ error → ls: cannot access 'nope'" in text
        agent = await bot.services.runtime.get(key)
        recorded = [e.payload for e in agent.tree.events if e.type == "acp.tool_call"]
        assert [(r["title"], r["status"], r["output"]) for r in recorded] == [
            ("List files", "completed", "notes.txt\nplan.md\n"),
            ("Run ls nope", "failed", "ls: cannot access 'nope': No such file or directory\n"),
        ]

    async def test_a_run_is_announced_once_and_the_thread_let_go(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "say hello", mode="run")
        await settle(bot, key)
        await done(bot)

        said = [m.content for m in bot.fake.messages_in(thread)]
        assert [c for c in said if ANNOUNCED in c] == ["✅ **Coder** completed its task."]
        assert "the subagent finished its task" in said[-1]
        assert not bot.services.bindings.live()
        assert not bot.services.acp.running()  # its process stopped with the binding

    async def test_a_long_diff_comes_as_a_file(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "make a diff")
        await settle(bot, key)

        (posted,) = [m for m in bot.fake.messages_in(thread) if m.attachments]
        assert posted.content == "📝 big.txt: +400 -1"
        (file,) = posted.attachments
        assert file.filename == "big.txt.diff"
        assert b"+line 399" in file.data
        assert "-# 🔧 `edit big.txt` · ✅ ok → big.txt: +400 -1" in spoken(bot, thread)

    async def test_usage_model_and_compact_say_what_applies(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "hello there")
        await settle(bot, key)

        usage = content(await run(bot, bot.world.alice, "usage", thread))
        assert usage.startswith("**Usage of this session** · external agent `scripted`")
        assert "Tokens: 2 in · 3 out" in usage  # as the agent reported them
        model = await run(bot, bot.world.alice, "model", thread, name="other")
        assert ephemeral(model)
        assert "chooses its own model" in content(model)
        compact = await run(bot, bot.world.alice, "compact", thread)
        assert "keeps and compacts its own context" in content(compact)

    async def test_export_has_the_conversation_and_the_tool_calls(
        self, start_bot: StartBot
    ) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "use a tool")
        await settle(bot, key)
        await run(bot, bot.world.alice, "export", thread)
        (request,) = [r for r in bot.fake.requests_matching("POST", "/interactions/") if r.files]
        (file,) = request.files
        assert b"echo: use a tool" in file.data
        assert b"<html" in file.data.lower()

    async def test_a_missing_program_refuses_the_spawn(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot, command=["threadbound-no-such-agent", "acp"])
        handle = await bot.fake.invoke_command(
            bot.world.guild,
            bot.world.channel,
            bot.world.alice,
            "agents spawn",
            {"task": "hi", "agent": "coder"},
        )
        async with asyncio.timeout(TIMEOUT):
            response = await handle.wait_response()
            if response.callback_type == 5:
                (response,) = await handle.wait_followups(1)
        assert "threadbound-no-such-agent" in content(response)
        assert not bot.services.bindings.live()


class TestPermissions:
    async def test_buttons_carry_the_agents_own_options_and_answer_exactly_one(
        self, start_bot: StartBot
    ) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "please ask first")
        message = await approval_message(bot, thread)

        assert [b["label"] for b in buttons(message)] == ["Allow once", "Always allow", "Reject"]
        assert "wants to run `delete build/`" in message.content
        bob = bot.fake.add_member(bot.world.guild, "bob")
        refused = await press(bot, message, "Allow once", bob)
        assert ephemeral(refused)
        assert content(refused) == NOT_OWNER

        await press(bot, message, "Allow once", bot.world.alice)
        shown = await edited_to(bot, thread, message.id, "chosen by")
        await settle(bot, key)

        assert shown.content.endswith("✅ “Allow once”, chosen by alice")
        assert buttons(shown) == []
        assert "chosen: once" in spoken(bot, thread)

    async def test_reject_answers_the_reject_option(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "ask me")
        message = await approval_message(bot, thread)
        await press(bot, message, "Reject", bot.world.admin)
        shown = await edited_to(bot, thread, message.id, "chosen by")
        await settle(bot, key)

        assert "⛔ “Reject”" in shown.content
        assert "chosen: no" in spoken(bot, thread)

    async def test_no_answer_in_time_tells_the_agent_cancelled(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot, agent_settings={"approval_timeout_seconds": 60})
        key, thread = await coder_thread(bot, "ask me")
        message = await approval_message(bot, thread)
        assert "no answer within 1 min cancels the request" in message.content
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers(1)
        await bot.clock.advance(60)
        shown = await edited_to(bot, thread, message.id, "nobody answered")
        await settle(bot, key)

        assert buttons(shown) == []
        assert "the agent was told it is cancelled" in shown.content
        assert "permission cancelled" in spoken(bot, thread)

    async def test_cancel_answers_cancelled_and_withdraws_the_buttons(
        self, start_bot: StartBot
    ) -> None:
        """/cancel while a permission waits: the request says cancelled, by whom (the
        agent is answered ``cancelled``), and so do its tool line and the status line."""
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "ask me")
        message = await approval_message(bot, thread)
        await run(bot, bot.world.alice, "cancel", thread)
        shown = await edited_to(bot, thread, message.id, "cancelled by")
        await settle(bot, key)
        assert buttons(shown) == []
        assert shown.content == "🔐 `delete build/`: ⏹️ cancelled by @alice"
        assert "-# 🔧 `delete build/` · ⏹️ cancelled by @alice" in spoken(bot, thread)
        assert status_line(bot.fake, thread).startswith("Status: ⏹️ Cancelled by @alice")
        agent = await bot.services.runtime.get(key)
        (decided,) = [e.payload for e in agent.tree.events if e.type == "approval.decided"]
        alice = str(bot.world.alice.id)
        assert (decided["reason"], decided["by_user_id"], decided["by_name"]) == (
            "cancel",
            alice,
            "alice",
        )
        (cancel,) = [e.payload for e in agent.tree.events if e.type == "turn_cancelled"]
        assert (cancel["by_user_id"], cancel["by_name"]) == (alice, "alice")

        await bot.fake.user_says(thread, bot.world.alice, "and now hello")
        await said_in(bot, thread, "echo: and now hello")

    async def test_a_reject_the_agent_stops_at_is_the_persons_not_a_failure(
        self, start_bot: StartBot
    ) -> None:
        """An agent that stops (``cancelled``) after a person chose its reject option, as
        Codex does: the person rejected it, the agent did not fail. The tool line, the
        status line, the announcement and the log say who rejected it, with the option."""
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "ask me, abort if not")
        message = await approval_message(bot, thread)
        await press(bot, message, "Reject", bot.world.alice)
        await edited_to(bot, thread, message.id, "chosen by")
        await settle(bot, key)
        await done(bot)

        said = "\n".join(m.content for m in text_messages(bot.fake, thread))
        assert "-# 🔧 `delete build/` · ⛔ rejected by @alice: Reject" in spoken(bot, thread)
        assert status_line(bot.fake, thread).startswith("Status: ⛔ Rejected by @alice: Reject")
        assert "⛔ **Coder** stopped. Rejected by @alice: Reject" in said
        for wrong in (FAILED, "⚠️ error", "failed", "the external agent stopped the turn"):
            assert wrong not in said
        agent = await bot.services.runtime.get(key)
        (end,) = [e.payload for e in agent.tree.events if e.type == "turn_ended"]
        assert (end["reason"], end["error"], end["by_name"], end["option"]) == (
            "rejected",
            None,
            "alice",
            "Reject",
        )
        assert end["by_user_id"] == str(bot.world.alice.id)
        (record,) = await bot.services.subagents.list()
        assert (record.state, record.outcome_reason) == ("rejected", "Rejected by @alice: Reject")

    async def test_a_clean_stop_withdraws_the_buttons_and_a_late_press_is_answered(
        self, start_bot: StartBot
    ) -> None:
        bot = await acp_bot(start_bot)
        _key, thread = await coder_thread(bot, "ask me")
        message = await approval_message(bot, thread)
        async with asyncio.timeout(TIMEOUT):
            await shut_down(bot.services, [bot.client], drain_seconds=30)
        await bot.services.close()
        shown = bot.fake.message(message.id)
        assert buttons(shown) == []
        assert "withdrawn" in shown.content

        again = await acp_bot(start_bot)
        await again.client.account.catch_up.wait_finished()
        await again.fake.user_says(thread, again.world.alice, "hello after")
        await said_in(again, thread, "echo: hello after")


class TestRunningTurns:
    async def test_cancel_stops_the_prompt(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "slow please")
        await said_in(bot, thread, "working…")
        await run(bot, bot.world.alice, "cancel", thread)
        await settle(bot, key)
        await bot.fake.user_says(thread, bot.world.alice, "quick one")
        await said_in(bot, thread, "echo: quick one")

    async def test_a_cancelled_prompt_is_marked_cut_off_and_its_plan_stopped(
        self, start_bot: StartBot
    ) -> None:
        """/cancel mid-prompt: the partial words say they were cut off there, the plan
        line no longer shows a step under way, and the thread names who cancelled."""
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "a plan, slow please")
        await said_in(bot, thread, "working…")
        await run(bot, bot.world.alice, "cancel", thread)
        await settle(bot, key)
        await done(bot)

        (partial,) = [m.content for m in persona_messages(bot.fake, thread) if "work" in m.content]
        assert partial == "working… \n-# ✂️ cut off here: cancelled by @alice"
        (plan,) = [m.content for m in text_messages(bot.fake, thread) if "📋" in m.content]
        assert plan == (
            "📋 **Plan** (1/2 done; ⏹️ cancelled by @alice): ✅ read the code · ⏹️ write the fix"
        )
        assert status_line(bot.fake, thread).startswith("Status: ⏹️ Cancelled by @alice")
        said = "\n".join(m.content for m in text_messages(bot.fake, thread))
        assert "⏹️ **Coder** stopped. Cancelled by @alice" in said
        assert FAILED not in said
        assert "failed" not in said

    async def test_a_steer_marks_the_prompt_it_cut_off(self, start_bot: StartBot) -> None:
        """A steer cancels the agent's prompt: the words it cut off say so."""
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "slow please")
        await said_in(bot, thread, "working…")
        await bot.fake.user_says(thread, bot.world.alice, "look at the tests instead")
        await said_in(bot, thread, "look at the tests instead")
        await settle(bot, key)

        first = persona_messages(bot.fake, thread)[0].content
        assert first == "working… \n-# ✂️ cut off here: a new message redirected the agent"

    async def test_a_plain_message_steers_by_prompting_again(self, start_bot: StartBot) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "slow please")
        await said_in(bot, thread, "working…")
        steer = await bot.fake.user_says(thread, bot.world.alice, "look at the tests instead")
        await said_in(bot, thread, "echo: look at the tests instead")
        await settle(bot, key)

        assert "🧭" in [r.emoji_name for r in bot.fake.message(steer.id).reactions]
        text = "\n".join(m.content for m in bot.fake.messages_in(thread))
        assert "<steering" not in text
        assert "threadbound, the chat bridge" not in text
        assert FAILED not in "\n".join(m.content for m in text_messages(bot.fake, thread))
        label, words = prompts_received(workspace(bot, key))[-1]
        assert (label["audience"], label["meta"]["threadbound"]) == (
            ["assistant"],
            {"note": "steering"},
        )
        assert (words["text"], words["audience"]) == ("look at the tests instead", None)

    async def test_a_crash_is_one_notice_and_the_next_message_starts_again(
        self, start_bot: StartBot
    ) -> None:
        bot = await acp_bot(start_bot)
        key, thread = await coder_thread(bot, "crash now")
        await said_in(bot, thread, FAILED)
        await settle(bot, key)
        (notice,) = [m.content for m in text_messages(bot.fake, thread) if FAILED in m.content]
        assert "stopped in the middle of the turn (exit status 3)" in notice
        assert "the model could not answer" not in notice
        await done(bot)
        failed = [
            m.content for m in bot.fake.messages_in(thread) if "❌ **Coder** failed" in m.content
        ]
        assert len(failed) == 1  # the completion: announced once, as failed

        await bot.fake.user_says(thread, bot.world.alice, "are you back")
        await said_in(bot, thread, "echo: are you back")

    async def test_after_a_restart_the_session_is_loaded_and_nothing_is_replayed(
        self, start_bot: StartBot
    ) -> None:
        first = await acp_bot(start_bot)
        key, thread = await coder_thread(first, "remember blue")
        await settle(first, key)
        await first.services.subagents.wait_settled()
        await first.client.close()
        await first.services.close()
        before = len(first.fake.messages_in(thread))

        second = await acp_bot(start_bot)
        await second.client.account.catch_up.wait_finished()
        await second.fake.user_says(thread, second.world.alice, "what colour")
        await said_in(second, thread, "echo: what colour")
        await settle(second, key)

        later = [m.content for m in second.fake.messages_in(thread)[before:]]
        assert not any("remember blue" in text for text in later)  # the replay stays unposted
        assert not any("started again without its earlier session" in text for text in later)

    async def test_an_agent_that_cannot_load_starts_fresh_and_the_thread_says_so(
        self, start_bot: StartBot
    ) -> None:
        env = {"TB_TEST_SCRIPTED_NO_LOAD": "1"}
        first = await acp_bot(start_bot, no_load=True, env=env)
        key, thread = await coder_thread(first, "remember blue")
        await settle(first, key)
        await first.services.subagents.wait_settled()
        await first.client.close()
        await first.services.close()

        second = await acp_bot(start_bot, no_load=True, env=env)
        await second.client.account.catch_up.wait_finished()
        await second.fake.user_says(thread, second.world.alice, "what colour")
        await said_in(second, thread, "started again without its earlier session")
        await said_in(second, thread, "what colour")
        await settle(second, key)


async def test_a_request_a_killed_process_left_open_is_withdrawn_with_a_message(
    start_bot: StartBot,
) -> None:
    """The store and the thread as a killed process left them: a permission request
    asked, its buttons posted, never answered. The next start withdraws it visibly."""
    first = await acp_bot(start_bot)
    key, thread = await coder_thread(first, "hello")
    await settle(first, key)
    agent = await first.services.runtime.get(key)
    option = ApprovalOption(option_id="once", label="Allow once", kind="allow_once")
    await agent.append_many(
        [
            as_item(TurnStartedPayload(turn_id="t9", trigger="follow_up")),
            as_item(
                ApprovalRequestedPayload(
                    turn_id="t9",
                    step=0,
                    tool_call_id="acp_t9",
                    name="delete build/",
                    arguments="",
                    options=[option],
                )
            ),
        ]
    )
    request_id = agent.tree.events[-1].node_id
    record = first.binding()
    message_id = await first.client.account.delivery.bot_send(
        record, "🔐 asked before the crash", view=approval_view(request_id, [option])
    )
    await first.client.close()
    await first.services.close()

    again = await acp_bot(start_bot)
    shown = await edited_to(again, thread, int(message_id), "withdrawn")
    assert shown.content == "🔐 `delete build/`: ↩️ withdrawn: a bot restart ended the agent's turn"
    assert buttons(shown) == []
    assert "The bot stopped unexpectedly while **Coder** was working" in "\n".join(
        m.content for m in text_messages(again.fake, thread)
    )


async def test_a_handoff_can_hand_the_thread_to_an_external_agent(start_bot: StartBot) -> None:
    """Scout (a model) briefs and hands off; Coder (over ACP) takes the brief in the thread."""
    tables = acp_tables()
    agents = {
        "scout": {"display_name": "Scout", "handoff_to": ["coder"]},
        "coder": {**tables["agents"]["coder"], "user_startable": False},
    }
    bot, record = await scout_session(
        start_bot,
        [Step(text="Lisbon looks best."), Step(text="## Lisbon trip\nThree days, trains only.")],
        agents=agents,
        acp_agents=tables["acp_agents"],
    )
    key, thread = record.target_session_key, int(record.conversation.conversation_id)
    _, offer = await press_brief(bot, record, bot.world.alice)
    (handoff,) = await bot.services.handoffs.list(key)
    handle = await bot.fake.click_button(offer, f"tb:handoff:accept:{handoff.id}", bot.world.alice)
    async with asyncio.timeout(TIMEOUT):
        await handle.wait_response()
    await said_in(bot, thread, "Handoff from Scout — brief: Lisbon trip")
    await settle(bot, key)

    last = persona_messages(bot.fake, thread)[-1]
    assert last.username == "Coder"
    assert last.content.startswith("echo: Handoff from Scout — brief: Lisbon trip")
    context, brief = prompts_received(workspace(bot, key))[0]
    assert context["audience"] == ["assistant"]
    assert context["text"].startswith("The conversation so far in this thread")
    assert "Lisbon looks best." in context["text"]
    assert brief["audience"] is None
    assert (await bot.services.runtime.get(key)).settings.acp == "scripted"
    (done,) = await bot.services.handoffs.list(key)
    assert done.status == "completed"


async def test_a_request_withdrawn_by_a_restart_ends_its_tool_line_in_place(
    start_bot: StartBot,
) -> None:
    """The agent asked, the process went: the next start withdraws the request, and the
    tool line that said "waiting" says withdrawn, in its own message, once."""
    first = await acp_bot(start_bot)
    key, thread = await coder_thread(first, "ask me")
    await approval_message(first, thread)
    async with asyncio.timeout(TIMEOUT):
        waiting = await first.fake.wait_for_message(
            thread, lambda m: m.webhook_id is not None and "⏸️ waiting for approval" in m.content
        )
    await first.client.account.drain()
    await first.client.close()
    await first.services.close()

    again = await acp_bot(start_bot)
    shown = await edited_to(again, thread, waiting.id, "↩️ withdrawn")
    assert "waiting for approval" not in shown.content
    assert len(tool_lines(again.fake, thread)) == 1
    await settle(again, key)
