"""Issue 35's scenarios, written once and run on Discord and on Matrix.

Each says what people do and what they then see in the thread, through
:class:`tests.scenarios.platform.Platform`; nothing here knows which platform it is on.
A run the Matrix side cannot do yet is an expected failure naming what is missing.
"""

from __future__ import annotations

from collections.abc import Callable

from core.providers.scripted import split_text
from tests.scenarios.conftest import on_both
from tests.scenarios.platform import (
    ANNOUNCED,
    NEEDS_APPROVAL,
    PERSONA,
    Ask,
    Crashable,
    Platform,
    Reply,
    Shown,
    answer_to,
)

STORY = "The web tier is fine; the database answers slowly under load. Look at its indexes."
LONG = "a long job"
WORKING = "Working through the long job, step by step, and then some more."


def said_by_agent(shown: list[Shown]) -> list[str]:
    """What the agent said in the thread: its persona's messages but the announcements
    of an end (:meth:`Platform.announcements` counts those)."""
    return [
        s.text
        for s in shown
        if s.author == PERSONA and not any(mark in s.text for mark in ANNOUNCED)
    ]


def holds_on_the_long_job(ask: Ask) -> Reply:
    """The long job's answer holds after its first words; the rest is answered at once."""
    if ask.said == LONG:
        return Reply(WORKING, held=True)
    return answer_to(ask)


def shows(text: str) -> Callable[[list[Shown]], bool]:
    """A thread in which the agent has said ``text`` (whole, as its last edit)."""
    return lambda shown: text in said_by_agent(shown)


@on_both()
async def test_a_spawned_task_streams_under_the_persona_and_is_announced_once(
    platform: Platform,
) -> None:
    """The first words show under the persona's name before the model is done; the same
    message ends as the whole answer; the completion is announced once, after it."""
    await platform.start(lambda ask: Reply(STORY, held=True))
    thread = await platform.spawn("how is the service doing?")
    first_words = split_text(STORY, 2)[0]
    midway = await platform.read_until(thread, lambda shown: bool(said_by_agent(shown)))
    assert said_by_agent(midway) == [first_words]
    assert await platform.announcements(thread) == []

    platform.model.release()
    await platform.read_until(thread, shows(STORY))
    await platform.settled(thread)
    assert said_by_agent(await platform.read(thread)) == [STORY]
    (announcement,) = await platform.announcements(thread)
    assert "completed its task." in announcement
    assert PERSONA in announcement


@on_both()
async def test_a_message_mid_turn_steers_and_a_double_arrow_waits_for_the_turn(
    platform: Platform,
) -> None:
    """While the agent is answering, a plain message steers it (🧭) and ``>> text`` is
    queued (📥); the turn takes the steer, the follow-up is answered after it, each once."""
    await platform.start(holds_on_the_long_job)
    thread = await platform.session_thread("greet")
    await platform.say(thread, LONG)
    await platform.read_until(
        thread, lambda shown: split_text(WORKING, 2)[0] in said_by_agent(shown)
    )

    steer = await platform.say(thread, "focus on the summary")
    follow = await platform.say(thread, ">> then list sources")
    assert await platform.marks(steer) == ["🧭"]
    assert await platform.marks(follow) == ["📥"]
    platform.model.release()
    await platform.read_until(thread, shows("answer to then list sources"))
    await platform.settled(thread)

    asked = [a.said for a in platform.model.asked if a.tool_result is None]
    steered = [i for i, said in enumerate(asked) if "focus on the summary" in said]
    followed = [i for i, said in enumerate(asked) if said == "then list sources"]
    assert len(steered) == 1
    assert len(followed) == 1
    assert steered[0] < followed[0]
    spoken = said_by_agent(await platform.read(thread))
    assert spoken.count(WORKING) == 1
    assert spoken[-1] == "answer to then list sources"


@on_both()
async def test_cancel_stops_the_answer_where_it_was_and_the_thread_goes_on(
    platform: Platform,
) -> None:
    """Cancel mid-stream: the words shown stay, marked as cut off; the model is never
    asked to finish them; the next message is answered as usual."""
    await platform.start(holds_on_the_long_job)
    thread = await platform.session_thread("greet")
    await platform.say(thread, LONG)
    first_words = split_text(WORKING, 2)[0]
    await platform.read_until(thread, lambda shown: first_words in said_by_agent(shown))

    assert await platform.command(thread, "cancel")
    await platform.settled(thread)
    (cut,) = [t for t in said_by_agent(await platform.read(thread)) if t.startswith(first_words)]
    assert "✂️ cut off here" in cut
    assert WORKING not in cut

    await platform.say(thread, "hello again")
    await platform.read_until(thread, shows("answer to hello again"))


def checks_the_time(ask: Ask) -> Reply:
    """Asked about Tokyo, the model calls the tool that needs approval; given its result
    (or its refusal), it says what it read."""
    if ask.tool_result is not None:
        return Reply(f"the tool said: {ask.tool_result[:40]}")
    if "Tokyo" in ask.said:
        return Reply("Let me check.", tool=NEEDS_APPROVAL)
    return answer_to(ask)


@on_both()
async def test_an_approval_allowed_by_the_owner_runs_the_tool(platform: Platform) -> None:
    await platform.start(checks_the_time, approvals=True)
    thread = await platform.session_thread("greet")
    await platform.say(thread, "noon in Paris, in Tokyo?")
    decided = await platform.approve(thread, "allow")
    assert "allowed by" in decided
    await platform.settled(thread)
    (result,) = [a.tool_result for a in platform.model.asked if a.tool_result is not None]
    assert "Asia/Tokyo" in result
    assert said_by_agent(await platform.read(thread))[-1].startswith("the tool said: ")


@on_both()
async def test_an_approval_is_refused_to_a_non_owner_and_denied_by_the_owner(
    platform: Platform,
) -> None:
    await platform.start(checks_the_time, approvals=True)
    thread = await platform.session_thread("greet")
    await platform.say(thread, "noon in Paris, in Tokyo?")
    refused = await platform.approve(thread, "allow", by="other")
    assert "Only the person who started this session" in refused
    assert [a.tool_result for a in platform.model.asked if a.tool_result is not None] == []

    decided = await platform.approve(thread, "deny")
    assert "denied by" in decided
    await platform.settled(thread)
    (result,) = [a.tool_result for a in platform.model.asked if a.tool_result is not None]
    assert result.startswith("denied by")


@on_both()
async def test_a_message_written_while_the_bot_is_down_is_read_back_once(
    platform: Platform,
) -> None:
    """Written while the bot is stopped: answered after the restart, once; a second
    restart answers nothing again."""
    await platform.start()
    thread = await platform.session_thread("greet")
    await platform.stop()
    await platform.say(thread, "while you were away")
    await platform.start()
    await platform.read_until(thread, shows("answer to while you were away"))
    await platform.settled(thread)

    await platform.stop()
    await platform.start()
    await platform.say(thread, "and now?")
    await platform.read_until(thread, shows("answer to and now?"))
    await platform.settled(thread)
    asked = [a.said for a in platform.model.asked]
    assert sum("while you were away" in said for said in asked) == 1
    spoken = said_by_agent(await platform.read(thread))
    assert spoken.count("answer to while you were away") == 1
    assert spoken[-1] == "answer to and now?"


@on_both()
async def test_a_scheduled_run_happens_in_the_bound_thread_once(platform: Platform) -> None:
    """Scheduled in the thread for 20 minutes on: nothing at 19, the task's turn at 20,
    nothing again after."""
    await platform.start()
    thread = await platform.session_thread("greet")
    confirmed = await platform.schedule(thread, "summarise the overnight issues", minutes=20)
    assert "Scheduled" in confirmed
    await platform.pass_time(19)
    assert "answer to summarise the overnight issues" not in said_by_agent(
        await platform.read(thread)
    )
    await platform.pass_time(1)
    await platform.read_until(thread, shows("answer to summarise the overnight issues"))
    await platform.settled(thread)
    await platform.pass_time(60)
    await platform.settled(thread)
    asked = [a.said for a in platform.model.asked]
    assert asked.count("summarise the overnight issues") == 1
    said = said_by_agent(await platform.read(thread))
    assert said.count("answer to summarise the overnight issues") == 1


@on_both(fixture="crashable")
async def test_kill_9_mid_stream_then_restart_loses_nothing_and_repeats_nothing(
    crashable: Crashable,
) -> None:
    """Killed while an answer streams: after the restart the thread says the turn was
    cut off; the next message is answered whole, once; the spawn's announcement is
    still the only one; no message of the bot's shows twice."""
    await crashable.start(holds_on_the_long_job)
    thread = await crashable.session_thread("greet")
    await crashable.say(thread, LONG)
    first_words = split_text(WORKING, 2)[0]
    await crashable.read_until(thread, lambda shown: first_words in said_by_agent(shown))
    await crashable.kill()

    await crashable.start()
    await crashable.say(thread, "carry on")
    shown = await crashable.read_until(thread, shows("answer to carry on"))
    assert len(await crashable.announcements(thread)) == 1
    assert any("stopped unexpectedly" in s.text for s in shown if s.author == "bot")
    spoken = said_by_agent(shown)
    assert spoken.count("answer to carry on") == 1
    assert WORKING not in spoken  # the cut answer was not silently finished or re-run
    by_the_bot = [s.text for s in shown if s.author not in ("owner", "other")]
    assert len(by_the_bot) == len(set(by_the_bot))
