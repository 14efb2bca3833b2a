"""When the brief button is due: one rule over the session log and where it was last posted."""

from __future__ import annotations

import pytest

from core.bindings.records import BindingMetadata
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.config import AgentProfile
from core.handoffs.prompts import (
    LEGACY_PROMPTED_KEY,
    PROMPTS_KEY,
    BriefPrompts,
    DueBrief,
    brief_due,
    prompted_at,
)
from core.sessions.log import SessionLog
from core.store import Database
from tests.core.handoffs.sessions import Ending, Written
from tests.fixtures.bindings import conv

KEY = "agent:main:brief"
PROFILES = {
    "scout": AgentProfile(display_name="Scout", handoff_to=["writer", "editor"]),
    "writer": AgentProfile(display_name="Writer"),
}


@pytest.fixture
async def written(db: Database) -> Written:
    log = SessionLog(db, clock=FakeClock())
    return Written(log, await log.load(KEY))


def due(written: Written, prompted: int | None, agent: str = "scout") -> bool:
    return brief_due(written.tree.events, agent, prompted)


class TestBriefDue:
    async def test_due_once_the_first_turn_has_ended(self, written: Written) -> None:
        """Activated, then a turn ended: due, unless the button was posted since."""
        await written.activated("scout")
        assert not due(written, None)
        await written.turn(ending="open")
        assert not due(written, None)  # still running
        await written.turn()
        assert due(written, None)
        posted = written.tree.last_seq
        assert not due(written, posted)
        await written.turn()
        assert not due(written, posted)  # once, not after every answer

    async def test_a_cancelled_turn_alone_brings_no_button(self, written: Written) -> None:
        """Only a turn that ended brings it; a cancelled or cut-off one does not."""
        await written.activated("scout")
        await written.turn(ending="cancelled")
        await written.turn(ending="interrupted")
        assert not due(written, None)

    async def test_after_a_reject_the_next_turn_brings_it_again(self, written: Written) -> None:
        """Offered: not due; rejected: not yet; the agent's next turn ended: due."""
        await written.activated("scout")
        await written.turn()
        posted = written.tree.last_seq
        await written.requested()
        await written.turn("Write the brief", "## Lisbon")
        await written.handoff("offered", "h1")
        assert not due(written, posted)
        await written.turn()
        assert not due(written, None)  # an offer is open: never
        await written.handoff("rejected", "h1")
        assert not due(written, posted)
        await written.turn()
        assert due(written, posted)
        assert not due(written, written.tree.last_seq)

    @pytest.mark.parametrize("ending", ["cancelled", "interrupted", "error", "completed"])
    async def test_after_a_brief_not_written_the_next_turn_brings_it_again(
        self, written: Written, ending: Ending
    ) -> None:
        """A brief cut off, failed, or never offered (a process that died after its turn):
        not due at its own end, due once the next turn has ended."""
        await written.activated("scout")
        await written.turn()
        posted = written.tree.last_seq
        await written.requested()
        assert not due(written, None)  # being written
        await written.turn("Write the brief", "## Lis", ending=ending)
        assert not due(written, posted)
        await written.turn("what about Porto?", "Porto is close too.")
        assert due(written, posted)

    async def test_an_accepted_handoff_is_never_due_again_for_its_agent(
        self, written: Written
    ) -> None:
        """Accepted: the handoff is under way; the next agent's activation starts anew."""
        await written.activated("scout")
        await written.turn()
        await written.requested()
        await written.turn("Write the brief", "## Lisbon")
        await written.handoff("offered", "h1")
        await written.handoff("accepted", "h1")
        await written.activated("writer")
        await written.turn()
        assert not due(written, None)
        assert due(written, None, agent="writer")

    async def test_another_agents_reject_changes_nothing(self, written: Written) -> None:
        """Only the agent's own handoffs count."""
        await written.activated("scout")
        await written.turn()
        posted = written.tree.last_seq
        await written.handoff("offered", "h2", from_agent="writer")
        await written.handoff("rejected", "h2", from_agent="writer")
        await written.turn()
        assert not due(written, posted)


class TestPromptedAt:
    async def test_where_the_button_was_last_posted(self, written: Written) -> None:
        """The seq recorded per agent; none for an agent never offered it."""
        events = written.tree.events
        metadata = BindingMetadata.model_validate({PROMPTS_KEY: {"scout": 7}})
        assert prompted_at(metadata, "scout", events) == 7
        assert prompted_at(metadata, "writer", events) is None
        assert prompted_at(BindingMetadata(), "scout", events) is None

    async def test_the_earlier_rule_counts_as_offered_at_the_activation(
        self, written: Written
    ) -> None:
        """A binding of the "posted once" rule gets no second button, until a reject."""
        activation = await written.activated("scout")
        await written.turn()
        legacy = BindingMetadata.model_validate({LEGACY_PROMPTED_KEY: ["scout"]})
        assert prompted_at(legacy, "scout", written.tree.events) == activation.seq
        assert not due(written, prompted_at(legacy, "scout", written.tree.events))
        await written.handoff("offered", "h1")
        await written.handoff("rejected", "h1")
        await written.turn()
        assert due(written, prompted_at(legacy, "scout", written.tree.events))


class TestBriefPrompts:
    async def test_due_marked_and_still_known_after_a_restart(
        self, db: Database, written: Written
    ) -> None:
        """due() names the agent and its target; mark_prompted() is in the store, so a new
        binding service (a restarted process) finds it not due, until a reject and a turn."""
        bindings = SessionBindingService(db, clock=FakeClock())
        await bindings.start()
        record = await bindings.bind(KEY, "subagent", conv("t1", "100"))
        prompts = BriefPrompts(bindings, PROFILES)
        assert prompts.due(record, written.tree) is None  # nothing said yet
        await written.activated("scout")
        await written.turn()
        found = prompts.due(record, written.tree)
        assert found == DueBrief("scout", "writer", written.tree.last_seq)
        marked = await prompts.mark_prompted(record.binding_id, found)
        assert marked.metadata[PROMPTS_KEY] == {"scout": found.seq}

        restarted = SessionBindingService(db, clock=FakeClock())
        await restarted.start()
        again = BriefPrompts(restarted, PROFILES)
        stored = restarted.active(record.binding_id)
        assert stored is not None
        assert again.due(stored, written.tree) is None
        await written.handoff("offered", "h1")
        await written.handoff("rejected", "h1")
        await written.turn()
        assert again.due(stored, written.tree) == DueBrief("scout", "writer", written.tree.last_seq)

    async def test_an_agent_that_hands_off_to_nobody_is_never_due(
        self, db: Database, written: Written
    ) -> None:
        bindings = SessionBindingService(db, clock=FakeClock())
        await bindings.start()
        record = await bindings.bind(KEY, "subagent", conv("t1", "100"))
        await written.activated("writer")
        await written.turn()
        assert BriefPrompts(bindings, PROFILES).due(record, written.tree) is None
