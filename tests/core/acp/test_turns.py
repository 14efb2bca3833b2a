"""An agent whose turns an external ACP agent runs: the real SDK on both sides, a real
process (the tests' scripted agent), a real session log on a SQLite file.

Each test drives one path of :mod:`core.acp.turns` by a word the scripted agent
reacts to (see ``tests/acp_agents/scripted.py``). Approval timeouts and the idle
stop run on a fake clock; everything else waits on events, never on time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.acp.process import workspace_name
from core.acp.turns import UNANSWERED
from core.agent.events import (
    AgentErrorEvent,
    AgentNotice,
    ApprovalRequested,
    ApprovalResolved,
    FileShown,
    PlanShown,
    SteeringInjected,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnEnded,
)
from core.clock import FakeClock
from core.store import Database
from tests.fixtures.acp import KEY, Rig, prompts_received


@pytest.fixture
def database(db: Database) -> Database:
    """SQLite only: what is tested here is the protocol, not the store."""
    return db


@pytest.fixture
async def rig(tmp_path: Path, database: Database) -> AsyncIterator[Rig]:
    made = Rig(tmp_path, database, FakeClock())
    yield made
    await made.stop()


async def test_words_stream_and_the_turn_is_recorded_as_a_models(rig: Rig) -> None:
    await rig.start()

    ended = await rig.turn("hello there")

    assert ended.reason == "completed"
    assert rig.said() == "echo: hello there"
    assert len(rig.of(TextDelta)) == 3  # one event per chunk the agent sent
    answer = rig.logged("assistant_message")[-1]
    assert answer["text"] == "echo: hello there"
    usage = rig.logged("usage")[-1]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["estimated"]) == (
        2,
        3,
        False,
    )
    session = rig.logged("acp.session")
    assert len(session) == 1
    assert session[0]["agent"] == "scripted"
    assert session[0]["can_load"] is True
    assert rig.workspace.is_dir()  # the session works in a directory of its own


async def test_a_tool_call_is_a_tool_line_with_its_output(rig: Rig) -> None:
    await rig.start()

    await rig.turn("use a tool")

    started = rig.of(ToolStarted)
    finished = rig.of(ToolFinished)
    assert [s.call.name for s in started] == ["run ls"]
    assert finished[0].call.id == started[0].call.id
    assert (finished[0].content, finished[0].is_error) == ("notes.txt\nplan.md", False)
    assert finished[0].call.arguments == ""  # an update without a title renames nothing
    recorded = rig.logged("acp.tool_call")
    assert (recorded[0]["tool_call_id"], recorded[0]["title"]) == ("ls1", "run ls")
    assert (recorded[0]["status"], recorded[0]["kind"]) == ("completed", "execute")


async def test_a_command_reported_only_in_raw_output_shows_and_records_its_output(
    rig: Rig,
) -> None:
    """Codex's adapter: no ``content``, the command's end event as ``rawOutput``."""
    await rig.start()

    await rig.turn("run it as codex does")

    (finished,) = rig.of(ToolFinished)
    assert (finished.content, finished.is_error) == ("notes.txt\nplan.md\n", False)
    (recorded,) = rig.logged("acp.tool_call")
    assert (recorded["status"], recorded["output"]) == ("completed", "notes.txt\nplan.md\n")


async def test_a_non_zero_exit_code_in_raw_output_fails_the_call(rig: Rig) -> None:
    await rig.start()

    await rig.turn("codex, make it fail")

    (finished,) = rig.of(ToolFinished)
    assert finished.is_error is True
    assert finished.content == "ls: cannot access 'nope': No such file or directory\n"
    (recorded,) = rig.logged("acp.tool_call")
    assert recorded["status"] == "failed"
    assert recorded["output"].startswith("ls: cannot access 'nope'")


async def test_a_raw_output_of_another_shape_is_shown_as_json(rig: Rig) -> None:
    await rig.start()

    await rig.turn("search for it")

    (finished,) = rig.of(ToolFinished)
    assert finished.content == '{"query":"threadbound","hits":2}'
    assert rig.logged("acp.tool_call")[0]["output"] == '{"query":"threadbound","hits":2}'


async def test_ids_an_agent_uses_again_are_new_calls_in_each_turn(rig: Rig) -> None:
    """The scripted agent names every ``tool`` call ``ls1``: each turn's is its own."""
    await rig.start()

    await rig.turn("tool once")
    await rig.turn("tool twice")

    ids = [s.call.id for s in rig.of(ToolStarted)]
    assert len(set(ids)) == 2


async def test_allow_once_answers_exactly_that_option(rig: Rig) -> None:
    agent = await rig.start()
    await agent.send("ask first")
    request = await rig.until(ApprovalRequested)

    assert [(o.option_id, o.label, o.kind) for o in request.options] == [
        ("once", "Allow once", "allow_once"),
        ("always", "Always allow", "allow_always"),
        ("no", "Reject", "reject_once"),
    ]
    await agent.decide(request.call.id, "allow", by_name="Alice", option_id="once")
    await rig.until(TurnEnded)

    assert "chosen: once" in rig.said()
    decided = rig.logged("approval.decided")[-1]
    assert (decided["decision"], decided["option_id"]) == ("allow", "once")
    assert rig.of(ToolFinished)[-1].is_error is False


async def test_reject_answers_the_reject_option(rig: Rig) -> None:
    agent = await rig.start()
    await agent.send("ask")
    request = await rig.until(ApprovalRequested)

    await agent.decide(request.call.id, "deny", by_name="Alice", option_id="no")
    await rig.until(TurnEnded)

    assert "chosen: no" in rig.said()
    assert rig.of(ToolFinished)[-1].is_error is True


async def test_no_answer_in_time_answers_cancelled(rig: Rig) -> None:
    agent = await rig.start(approval_timeout_s=60)
    await agent.send("ask")
    request = await rig.until(ApprovalRequested)

    await rig.clock.wait_for_sleepers()
    await rig.clock.advance(61)
    await rig.until(TurnEnded)

    assert "permission cancelled" in rig.said()
    assert rig.logged("approval.decided")[-1]["decision"] == "timeout"
    resolved = rig.of(ApprovalResolved)[-1]
    assert (resolved.call_id, resolved.decision) == (request.call.id, "timeout")


async def test_an_agent_that_stops_after_no_answer_in_time_is_not_blamed(rig: Rig) -> None:
    """The bot answered ``cancelled`` for nobody; the agent stopping then is the bot's
    ending, said so: not "the external agent stopped the turn"."""
    agent = await rig.start(approval_timeout_s=60)
    await agent.send("ask, abort if not")
    await rig.until(ApprovalRequested)
    await rig.clock.wait_for_sleepers()
    await rig.clock.advance(61)
    await rig.until(TurnEnded)

    (failed,) = rig.of(AgentErrorEvent)
    assert failed.message == UNANSWERED


async def test_cancel_answers_an_open_request_and_the_agent_goes_on_later(rig: Rig) -> None:
    agent = await rig.start()
    await agent.send("ask")
    await rig.until(ApprovalRequested)

    await agent.cancel()

    assert rig.count(TurnCancelled) == 1
    assert rig.logged("approval.decided")[-1]["decision"] == "withdrawn"
    assert not agent.tree.pending_approvals
    ended = await rig.turn("hello again")
    assert ended.reason == "completed"
    assert rig.said().endswith("echo: hello again")


async def test_cancel_stops_a_running_prompt(rig: Rig) -> None:
    agent = await rig.start()
    await agent.send("be slow")
    await rig.until(TextDelta)

    await agent.cancel()

    assert rig.count(TurnCancelled) == 1
    assert rig.logged("assistant_message")[-1]["text"] == "working… "  # what it said is kept
    ended = await rig.turn("and now?")
    assert ended.reason == "completed"


async def test_a_steer_cancels_the_prompt_and_is_sent_as_the_next_one(rig: Rig) -> None:
    agent = await rig.start()
    await agent.send("be slow")
    await rig.until(TextDelta)

    await agent.steer("change of plan", author_id="42", author_name="Alice")
    ended = await rig.until(TurnEnded)

    assert ended.reason == "completed"
    assert rig.count(SteeringInjected) == 1
    assert rig.said() == "working… echo: change of plan"  # the person's words, untagged
    label, words = prompts_received(rig.workspace)[-1]
    assert (label["audience"], label["meta"]) == (
        ["assistant"],
        {"threadbound": {"note": "steering"}},
    )
    assert "steering message" in label["text"]
    assert (words["text"], words["audience"], words["meta"]) == ("change of plan", None, None)
    steer = [e for e in agent.tree.path() if e.type == "user_message"][-1]
    assert steer.delivery_mode == "steer"
    assert rig.count(TurnCancelled) == 0


async def test_where_several_people_write_who_wrote_is_a_note_beside_the_words(
    rig: Rig,
) -> None:
    agent = await rig.start()
    await rig.turn("hello")
    before = rig.count(TurnEnded)
    await agent.send("and from me", author_id="43", author_name="Bob")
    await rig.until(TurnEnded, lambda _: rig.count(TurnEnded) > before)

    assert rig.said().endswith("echo: and from me")
    note, words = prompts_received(rig.workspace)[-1]
    assert note["text"] == "(threadbound, the chat bridge: the next block is Bob's message.)"
    assert (note["audience"], note["meta"]) == (["assistant"], {"threadbound": {"note": "author"}})
    assert (words["text"], words["audience"]) == ("and from me", None)


async def test_a_crash_fails_the_turn_once_and_the_next_message_starts_again(
    rig: Rig,
) -> None:
    agent = await rig.start()

    ended = await rig.turn("crash now")

    assert ended.reason == "error"
    errors = rig.of(AgentErrorEvent)
    assert len(errors) == 1
    assert errors[0].external
    assert "stopped in the middle of the turn (exit status 3)" in errors[0].message
    assert rig.logged("turn_ended")[-1]["reason"] == "error"
    assert agent.tree.running_turn_id is None

    again = await rig.turn("hello after")
    assert again.reason == "completed"
    assert rig.said().endswith("echo: hello after")
    assert rig.count(AgentNotice) == 0  # the agent loaded its session: nothing to say


async def test_after_a_restart_the_session_is_loaded_and_nothing_is_replayed(
    rig: Rig,
) -> None:
    await rig.start()
    await rig.turn("first words")
    first = rig.logged("acp.session")
    await rig.stop()
    rig.events.clear()

    await rig.start()
    await rig.turn("second words")

    assert rig.said() == "echo: second words"  # the replay of "first words" is not shown
    assert rig.logged("acp.session") == first  # the same session, not a new one
    assert rig.count(AgentNotice) == 0


async def test_an_agent_that_cannot_load_starts_fresh_with_the_conversation(
    tmp_path: Path, database: Database
) -> None:
    rig = Rig(tmp_path, database, FakeClock(), no_load=True)
    try:
        await rig.start()
        await rig.turn("remember the word blue")
        assert rig.logged("acp.session")[0]["can_load"] is False
        await rig.stop()
        rig.events.clear()

        await rig.start()
        await rig.turn("which word?")
    finally:
        await rig.stop()

    notices = rig.of(AgentNotice)
    assert len(notices) == 1
    assert "cannot load earlier sessions" in notices[0].text
    assert rig.said() == "echo: which word?"  # the context is never taken for the request
    context, words = prompts_received(rig.workspace)[-1]
    assert context["text"].startswith("The conversation so far in this thread")
    assert "Alice: remember the word blue" in context["text"]
    assert (context["audience"], context["meta"]) == (
        ["assistant"],
        {"threadbound": {"note": "context"}},
    )
    assert (words["text"], words["audience"]) == ("which word?", None)
    assert len(rig.logged("acp.session")) == 2


async def test_a_missing_command_fails_the_turn_with_what_to_fix(
    tmp_path: Path, database: Database
) -> None:
    rig = Rig(tmp_path, database, FakeClock(), command=["no-such-agent-program", "acp"])
    try:
        await rig.start()
        ended = await rig.turn("hello")
    finally:
        await rig.stop()

    assert ended.reason == "error"
    message = rig.of(AgentErrorEvent)[0].message
    assert "'no-such-agent-program' was not found" in message
    assert "[acp_agents.scripted] command" in message


async def test_a_noisy_stderr_goes_to_the_session_log_file(rig: Rig) -> None:
    await rig.start()

    ended = await rig.turn("be noisy")

    assert ended.reason == "completed"
    logs = list((rig.config.acp_workspace_root("scripted") / ".logs").iterdir())
    assert [p.name for p in logs] == [f"{workspace_name(KEY)}.stderr.log"]
    assert logs[0].stat().st_size > 200_000


async def test_a_long_diff_goes_as_a_file(rig: Rig) -> None:
    await rig.start()

    await rig.turn("make a diff")

    shown = rig.of(FileShown)
    assert [f.name for f in shown] == ["big.txt.diff"]
    assert shown[0].data.startswith(b"--- a/big.txt\n+++ b/big.txt\n")
    assert shown[0].caption == "📝 big.txt: +400 -1"
    assert rig.of(ToolFinished)[-1].content == "big.txt: +400 -1"


async def test_plans_show_and_thoughts_do_not(rig: Rig) -> None:
    await rig.start()

    await rig.turn("plan and think")

    plans = rig.of(PlanShown)
    assert [p.entries for p in plans] == [
        (("read the code", "pending"), ("write the fix", "pending")),
        (("read the code", "completed"), ("write the fix", "pending")),
    ]
    assert "secret" not in rig.said()


async def test_a_refusal_fails_the_turn_and_says_so(rig: Rig) -> None:
    await rig.start()

    ended = await rig.turn("refuse this")

    assert ended.reason == "error"
    assert "refused" in rig.of(AgentErrorEvent)[0].message


async def test_an_idle_agent_is_stopped_and_started_again_by_the_next_message(
    rig: Rig,
) -> None:
    await rig.start()
    await rig.turn("hello")
    assert rig.connections is not None
    assert rig.connections.running() == [KEY]

    await rig.clock.advance(899)
    assert await rig.connections.stop_idle() == []
    await rig.clock.advance(2)
    assert await rig.connections.stop_idle() == [KEY]
    assert rig.connections.running() == []

    ended = await rig.turn("hello again")
    assert ended.reason == "completed"
    assert rig.connections.running() == [KEY]
