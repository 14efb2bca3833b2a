"""An external agent's (ACP) permission request in a Matrix thread, decided by reaction.

The bot runs the real services (:mod:`tests.matrix.bots`) with the profile ``coder``
over the tests' scripted ACP agent (``tests/acp_agents/scripted.py``, a real process;
a word in its task picks its path). The owner spawns it with ``!agents spawn`` in a room
they made; the agent asks to run ``delete build/`` with its own three options. The
prompt lists them with their emoji and carries the bot's reactions; the owner and
someone else react with their own clients, and what they read (the prompt's edit, the
persona's words, a notice, a reaction removed) is read back the same way. What the
agent was told is what it says next (``chosen: <option id>``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mautrix.client import Client
from mautrix.types import EventID, EventType, PowerLevelStateEventContent, RoomID, UserID

from adapters.matrix.ids import thread_of
from adapters.matrix.streaming import PROFILE
from core.subagents.owners import NOT_OWNER
from tests.fixtures.acp import acp_tables
from tests.matrix.bots import Bot, a_person, services_bot
from tests.matrix.synapse import Synapse
from tests.matrix.test_approvals import (
    edits_of,
    notices,
    prompts,
    reactions_on,
    relation,
    room_events,
)
from tests.matrix.test_commands import answer_to, shared_room, started

Events = list[dict[str, Any]]


def spoken(events: Events, bot: Bot, root: str) -> list[str]:
    """The persona's messages in the thread on ``root``, each at its last edit, in order."""
    said = [
        e
        for e in events
        if e.get("sender") == bot.user.user_id
        and PROFILE in (e.get("content") or {})
        and relation(e).get("rel_type") == "m.thread"
        and relation(e).get("event_id") == root
    ]
    return [(edits_of(events, e["event_id"]) or [e["content"]["body"]])[-1] for e in said]


def announced(events: Events, bot: Bot, root: str) -> list[str]:
    """The bot's announcements of the session's end: replies to the thread's root in the
    room's main timeline."""
    return [
        str(e["content"].get("body"))
        for e in events
        if e.get("sender") == bot.user.user_id
        and (relation(e).get("m.in_reply_to") or {}).get("event_id") == root
        and relation(e).get("rel_type") != "m.thread"
    ]


def ended(events: Events, bot: Bot, root: str, needle: str) -> bool:
    """Whether the persona's words in the thread have come to ``needle``."""
    return any(needle in text for text in spoken(events, bot, root))


@dataclass
class Asking:
    bot: Bot
    room_id: RoomID
    root: str
    key: str
    """The spawned session's key."""
    prompt: dict[str, Any]


@asynccontextmanager
async def asking(
    synapse: Synapse, tmp_path: Path, owner: Client, other: Client, task: str
) -> AsyncIterator[Asking]:
    """The owner spawns ``coder`` with ``task`` in a room they made (``other`` in it too);
    once the agent's permission prompt is posted and carries the bot's three reactions."""
    tables = acp_tables()
    async with services_bot(
        synapse,
        tmp_path,
        thread_bindings={"spawnSubagentSessions": True},
        agents=tables["agents"],
        acp_agents=tables["acp_agents"],
    ) as bot:
        room_id = await shared_room(bot, owner, other)
        levels = await owner.get_state_event(room_id, EventType.ROOM_POWER_LEVELS)
        assert isinstance(levels, PowerLevelStateEventContent)
        levels.users[UserID(bot.user.user_id)] = 50  # enough to redact others' reactions
        await owner.send_state_event(room_id, EventType.ROOM_POWER_LEVELS, levels)
        async with bot.running() as watched:
            await watched.wait_batches(1)
            answer = await answer_to(
                owner, room_id, f'!agents spawn task:"{task}" agent:coder mode:session'
            )
            root = str(started(answer)["root"])
            binding = bot.services.bindings.active_for_conversation(
                thread_of("default", room_id, root)
            )
            assert binding is not None

            def asked(events: Events) -> bool:
                found = prompts(events)
                return (
                    bool(found)
                    and len(reactions_on(events, found[0]["event_id"], bot.user.user_id)) == 3
                )

            (prompt,) = prompts(await room_events(owner, room_id, asked))
            yield Asking(bot, room_id, root, binding.target_session_key, prompt)


def name_of(person: Client) -> str:
    """How the room names a person: their display name, the localpart by default."""
    return person.mxid.split(":")[0].removeprefix("@")


@pytest.fixture
async def owner(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


@pytest.fixture
async def other(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


def decisions(payloads: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [(p["decision"], p.get("option_id"), p["by_user_id"]) for p in payloads]


class TestAnExternalAgentsPermission:
    async def test_the_owners_allow_once_tells_the_agent_that_option(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """The prompt lists the agent's own options with their emoji, in the thread, with
        the bot's reactions; the owner's ✅ answers the agent "once" (its allow-once
        option), the agent finishes, and the prompt says which option and who chose it."""
        async with asking(synapse, tmp_path, owner, other, "please ask first") as waiting:
            bot, prompt = waiting.bot, waiting.prompt
            await owner.react(waiting.room_id, EventID(prompt["event_id"]), "✅")
            events = await room_events(
                owner,
                waiting.room_id,
                lambda found: (
                    edits_of(found, prompt["event_id"])
                    and ended(found, bot, waiting.root, "chosen: once")
                    and not reactions_on(found, prompt["event_id"], bot.user.user_id)
                ),
            )
            agent = await bot.services.runtime.get(waiting.key)
            decided = [dict(e.payload) for e in agent.tree.events if e.type == "approval.decided"]
        body = prompt["content"]["body"]
        assert body.startswith("🔐 **Coder** wants to run `delete build/`.")
        assert "no answer within 10 min cancels the request" in body
        assert body.endswith("\n✅ Allow once\n♾️ Always allow\n❌ Reject")
        assert (relation(prompt)["rel_type"], relation(prompt)["event_id"]) == (
            "m.thread",
            waiting.root,
        )
        assert prompt["content"]["m.mentions"] == {}
        # the bot's three choices (seen by ``asking``) are taken back once decided
        assert reactions_on(events, prompt["event_id"], bot.user.user_id) == []
        assert reactions_on(events, prompt["event_id"], owner.mxid) == ["✅"]
        name = name_of(owner)
        (edit,) = edits_of(events, prompt["event_id"])
        assert edit == f"🔐 `delete build/`: ✅ “Allow once”, chosen by {name}"
        assert decisions(decided) == [("allow", "once", owner.mxid)]
        assert spoken(events, bot, waiting.root)[-1] == "**Coder**\nchosen: once"

    async def test_the_owners_reject_ends_the_turn_rejected_and_marks_the_words_cut(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """The owner's ❌ answers the agent its reject option; the agent says a few words
        and stops (as Codex does): the turn ends rejected by the owner, not failed; the
        prompt says which option and who chose it, the words it cut off are marked there
        and the announcement under the thread's root names who rejected it."""
        task = "ask me, abort if not, and grumble"
        async with asking(synapse, tmp_path, owner, other, task) as waiting:
            bot, prompt = waiting.bot, waiting.prompt
            await owner.react(waiting.room_id, EventID(prompt["event_id"]), "❌")
            events = await room_events(
                owner,
                waiting.room_id,
                lambda found: (
                    edits_of(found, prompt["event_id"])
                    and ended(found, bot, waiting.root, "✂️ cut off here")
                    and announced(found, bot, waiting.root)
                ),
            )
            agent = await bot.services.runtime.get(waiting.key)
            decided = [dict(e.payload) for e in agent.tree.events if e.type == "approval.decided"]
            (end,) = [dict(e.payload) for e in agent.tree.events if e.type == "turn_ended"]
        name = name_of(owner)
        (edit,) = edits_of(events, prompt["event_id"])
        assert edit == f"🔐 `delete build/`: ⛔ “Reject”, chosen by {name}"
        assert decisions(decided) == [("deny", "no", owner.mxid)]
        (cut,) = [text for text in spoken(events, bot, waiting.root) if "build/ as it is" in text]
        assert cut == (
            "**Coder**\nThen I leave build/ as it is, but \n\n"
            f"✂️ cut off here: rejected by @{name}: Reject"
        )
        assert (end["reason"], end["error"], end["by_user_id"], end["option"]) == (
            "rejected",
            None,
            owner.mxid,
            "Reject",
        )
        (announcement,) = announced(events, bot, waiting.root)
        assert announcement.startswith(f"⛔ **Coder** stopped. Rejected by @{name}: Reject")
        said = "\n".join(str(e["content"].get("body")) for e in events if "content" in e)
        assert "This turn failed" not in said

    async def test_someone_elses_reaction_is_removed_and_the_request_still_waits(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """A reaction by someone neither owner nor administrator answers the agent
        nothing: it is redacted, they are told why, and the request still waits."""
        async with asking(synapse, tmp_path, owner, other, "please ask first") as waiting:
            bot, prompt = waiting.bot, waiting.prompt
            theirs = await other.react(waiting.room_id, EventID(prompt["event_id"]), "✅")
            events = await room_events(
                other,
                waiting.room_id,
                lambda found: (
                    notices(found, bot, prompt["event_id"])
                    and any(
                        e.get("type") == "m.room.redaction"
                        and theirs in (e.get("redacts"), (e.get("content") or {}).get("redacts"))
                        for e in found
                    )
                ),
            )
            agent = await bot.services.runtime.get(waiting.key)
            pending = [p.name for p in agent.tree.pending_approvals]
            decided = [e for e in agent.tree.events if e.type == "approval.decided"]
        (notice,) = notices(events, bot, prompt["event_id"])
        assert notice == f"{name_of(other)}: {NOT_OWNER}"
        assert reactions_on(events, prompt["event_id"], other.mxid) == []  # redacted
        assert edits_of(events, prompt["event_id"]) == []
        assert pending == ["delete build/"]
        assert decided == []
        assert not ended(events, bot, waiting.root, "chosen:")
