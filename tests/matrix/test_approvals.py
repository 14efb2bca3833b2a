"""adapters.matrix.approvals against a real Synapse: a tool call waits for a reaction.

The bot runs the real services with the scripted model and the project's MCP test
server (``tests/mcp_servers/toolbox.py``), whose ``echo`` needs approval. The model
calls it; the bot posts a prompt in the bound thread and reacts once per choice. The
session's owner and someone else react with their own clients; what they read (the
prompt edited to say how it ended, a notice, a reaction removed) is read back the
same way, and what the model got is read from its requests.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mautrix.api import Method
from mautrix.api import Path as Api
from mautrix.client import Client
from mautrix.types import (
    EventID,
    EventType,
    PowerLevelStateEventContent,
    RoomID,
    UserID,
)

from adapters.matrix.approvals import FIELD, reaction_choices
from adapters.matrix.ids import thread_of
from core.bindings.records import BindingMetadata, BindingPersona
from core.inbox import InboxPress
from core.providers.scripted import ScriptedProvider, Step
from core.providers.types import ChatMessage, ToolCall
from core.sessions.payloads import ApprovalOption
from core.subagents.owners import NOT_OWNER
from tests.matrix.bots import WAIT, Bot, a_person, room_with, send, services_bot
from tests.matrix.synapse import Synapse

SESSION = "agent:matrix-approvals"
TOOLBOX = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "toolbox.py")
ECHO = ToolCall(id="t1", name="toolbox__echo", arguments='{"text": "ping from the thread"}')
SERVERS = {"toolbox": {"command": [sys.executable, TOOLBOX], "require_approval": ["echo"]}}


def call_then_answer(messages: Sequence[ChatMessage]) -> Step:
    """Call ``echo`` for a person's message, then answer once its result is in."""
    if messages[-1].role == "user":
        return Step(text="Let me check.", tool_calls=(ECHO,))
    return Step(text="All done.")


def tool_result(bot: Bot, call_id: str) -> str | None:
    """What the model read for ``call_id`` in its latest request, if it got there."""
    for messages in reversed(bot.provider.calls):
        for message in messages:
            if message.role == "tool" and message.tool_call_id == call_id:
                return message.content or ""
    return None


def relation(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


async def room_events(
    person: Client, room_id: RoomID, done: Callable[[list[dict[str, Any]]], Any]
) -> list[dict[str, Any]]:
    """The room's events, oldest first, as ``person``'s client reads them, once
    ``done(events)`` holds (a long-poll of their ``/sync`` between looks)."""
    since = None
    async with asyncio.timeout(WAIT):
        while True:
            page = await person.api.request(
                Method.GET,
                Api.v3.rooms[room_id].messages,
                query_params={"dir": "b", "limit": "200"},
            )
            events: list[dict[str, Any]] = list(reversed(page.get("chunk") or []))
            if done(events):
                return events
            since = (await person.sync(since=since, timeout=5_000))["next_batch"]


def prompts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if FIELD in (e.get("content") or {})]


def reactions_on(events: list[dict[str, Any]], event_id: str, sender: str) -> list[str]:
    """The keys ``sender`` reacted with on ``event_id`` and did not take back."""
    return [
        relation(e)["key"]
        for e in events
        if e.get("type") == "m.reaction"
        and e.get("sender") == sender
        and relation(e).get("event_id") == event_id
        and relation(e).get("key")
    ]


def edits_of(events: list[dict[str, Any]], event_id: str) -> list[str]:
    return [
        e["content"]["m.new_content"]["body"]
        for e in events
        if relation(e).get("rel_type") == "m.replace" and relation(e).get("event_id") == event_id
    ]


def notices(events: list[dict[str, Any]], bot: Bot, prompt_id: str) -> list[str]:
    """The bot's replies to the prompt."""
    return [
        e["content"]["body"]
        for e in events
        if e.get("sender") == bot.user.user_id
        and relation(e).get("m.in_reply_to", {}).get("event_id") == prompt_id
        and relation(e).get("rel_type") == "m.thread"
        and FIELD not in e["content"]
    ]


@dataclass
class Waiting:
    bot: Bot
    room_id: RoomID
    root: EventID
    prompt: dict[str, Any]


@asynccontextmanager
async def waiting_for_approval(
    synapse: Synapse, tmp_path: Path, owner: Client, other: Client
) -> AsyncIterator[Waiting]:
    """A session bound to a thread the owner started, its model's ``echo`` waiting: the
    prompt is posted and carries the bot's three reactions."""
    provider = ScriptedProvider(call_then_answer)
    async with services_bot(
        synapse,
        tmp_path,
        provider=provider,
        mcp_servers=SERVERS,
        agent_settings={"tools": ["mcp:toolbox"]},
    ) as bot:
        room_id = await room_with(bot, owner)
        await owner.invite_user(room_id, other.mxid)
        await other.join_room_by_id(room_id)
        levels = await owner.get_state_event(room_id, EventType.ROOM_POWER_LEVELS)
        assert isinstance(levels, PowerLevelStateEventContent)
        levels.users[UserID(bot.user.user_id)] = 50  # enough to redact others' reactions
        await owner.send_state_event(room_id, EventType.ROOM_POWER_LEVELS, levels)
        root = await send(owner, room_id, "🧵 the work")
        async with bot.running() as watched:
            await watched.wait_batches(1)
            await bot.services.bindings.bind(
                SESSION,
                "session",
                thread_of("default", room_id, root),
                metadata=BindingMetadata(persona=BindingPersona(name="Scout")),
                bound_by=owner.mxid,
                scope=room_id,
            )
            await send(owner, room_id, "echo something for me", thread=root)

            def asked(events: list[dict[str, Any]]) -> bool:
                found = prompts(events)
                return (
                    bool(found)
                    and len(reactions_on(events, found[0]["event_id"], bot.user.user_id)) == 3
                )

            events = await room_events(owner, room_id, asked)
            (prompt,) = prompts(events)
            yield Waiting(bot, room_id, root, prompt)


@pytest.fixture
async def owner(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


@pytest.fixture
async def other(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


class TestApprovals:
    async def test_the_owner_allows_and_the_tool_runs(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """The prompt lists the choices with their emoji, in the thread, the bot's three
        reactions under it; the owner's ✅ runs the call, the prompt says who allowed it and
        the bot's reactions are taken back."""
        async with waiting_for_approval(synapse, tmp_path, owner, other) as waiting:
            bot, prompt = waiting.bot, waiting.prompt
            assert tool_result(bot, "t1") is None
            await owner.react(waiting.room_id, EventID(prompt["event_id"]), "✅")
            events = await room_events(
                owner,
                waiting.room_id,
                lambda found: (
                    edits_of(found, prompt["event_id"])
                    and any("All done." in (e["content"].get("body") or "") for e in found)
                    and not reactions_on(found, prompt["event_id"], bot.user.user_id)
                ),
            )
            result = tool_result(bot, "t1")
            agent = await bot.services.runtime.get(SESSION)
            (decided,) = [e for e in agent.tree.events if e.type == "approval.decided"]
        body = prompt["content"]["body"]
        assert body.startswith("🔐 **Scout** wants to run `toolbox__echo` (text: ping from")
        assert "The session's owner or an admin decides" in body
        assert body.endswith("\n✅ Allow\n♾️ Allow for this session\n❌ Deny")
        assert relation(prompt)["rel_type"] == "m.thread"
        assert relation(prompt)["event_id"] == waiting.root
        assert prompt["content"]["m.mentions"] == {}
        # the bot's choices were there to press (waiting_for_approval saw all three) and
        # are taken back once decided, as Discord's buttons go; the owner's press stays
        assert reactions_on(events, prompt["event_id"], bot.user.user_id) == []
        assert reactions_on(events, prompt["event_id"], owner.mxid) == ["✅"]
        name = owner.mxid.split(":")[0].removeprefix("@")
        (edit,) = edits_of(events, prompt["event_id"])
        assert edit == f"🔐 `toolbox__echo` (text: ping from the thread): ✅ allowed by {name}"
        assert result is not None
        assert "ping from the thread" in result
        assert (decided.payload["decision"], decided.payload["by_user_id"]) == (
            "allow",
            owner.mxid,
        )

    async def test_the_owner_denies_and_nothing_runs(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """❌ tells the model it was denied; the prompt says by whom."""
        async with waiting_for_approval(synapse, tmp_path, owner, other) as waiting:
            bot, prompt = waiting.bot, waiting.prompt
            await owner.react(waiting.room_id, EventID(prompt["event_id"]), "❌")
            events = await room_events(
                owner,
                waiting.room_id,
                lambda found: (
                    edits_of(found, prompt["event_id"])
                    and any("All done." in (e["content"].get("body") or "") for e in found)
                ),
            )
            result = tool_result(bot, "t1")
        name = owner.mxid.split(":")[0].removeprefix("@")
        (edit,) = edits_of(events, prompt["event_id"])
        assert edit.endswith(f": ⛔ denied by {name}")
        assert result is not None
        assert "ping from the thread" not in result
        assert "denied" in result.lower()

    async def test_someone_elses_reaction_is_removed_with_a_notice(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """A reaction by someone who is neither owner nor administrator decides nothing: it
        is redacted and they are told why; the request still waits for the owner."""
        async with waiting_for_approval(synapse, tmp_path, owner, other) as waiting:
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
            agent = await bot.services.runtime.get(SESSION)
            pending = [p.tool_call_id for p in agent.tree.pending_approvals]
        (notice,) = notices(events, bot, prompt["event_id"])
        name = other.mxid.split(":")[0].removeprefix("@")
        assert notice == f"{name}: {NOT_OWNER}"
        assert reactions_on(events, prompt["event_id"], other.mxid) == []  # redacted
        assert edits_of(events, prompt["event_id"]) == []
        assert pending == ["t1"]
        assert tool_result(bot, "t1") is None

    async def test_a_reaction_after_the_decision_is_told_it_was_decided(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """The owner allows, then reacts ❌ too: nothing changes, and the notice says how
        the request was decided, as a late press does on Discord."""
        async with waiting_for_approval(synapse, tmp_path, owner, other) as waiting:
            bot, prompt = waiting.bot, waiting.prompt
            await owner.react(waiting.room_id, EventID(prompt["event_id"]), "✅")
            await room_events(
                owner, waiting.room_id, lambda found: edits_of(found, prompt["event_id"])
            )
            await owner.react(waiting.room_id, EventID(prompt["event_id"]), "❌")
            events = await room_events(
                owner, waiting.room_id, lambda found: notices(found, bot, prompt["event_id"])
            )
            agent = await bot.services.runtime.get(SESSION)
            decided = [e.payload for e in agent.tree.events if e.type == "approval.decided"]
        name = owner.mxid.split(":")[0].removeprefix("@")
        (notice,) = notices(events, bot, prompt["event_id"])
        assert notice == f"{name}: Already decided: allowed by {name}."
        assert [d["decision"] for d in decided] == ["allow"]
        assert len(edits_of(events, prompt["event_id"])) == 1

    async def test_a_reaction_a_stopped_bot_left_is_decided_at_start(
        self, synapse: Synapse, tmp_path: Path, owner: Client, other: Client
    ) -> None:
        """A reaction a bot recorded but stopped before acting on is decided when the bot
        starts again; the restarted bot finds its prompt in the room rather than asking
        twice, and edits it."""
        async with waiting_for_approval(synapse, tmp_path, owner, other) as waiting:
            first, prompt = waiting.bot, waiting.prompt
        request_id = prompt["content"][FIELD]["request_id"]
        async with services_bot(
            synapse,
            tmp_path,
            provider=ScriptedProvider(call_then_answer),
            mcp_servers=SERVERS,
            agent_settings={"tools": ["mcp:toolbox"]},
            user=first.user,
        ) as bot:
            await bot.services.inbox.record_press(
                InboxPress(
                    conversation=thread_of("default", waiting.room_id, waiting.root),
                    item_id="$a-reaction-the-stopped-bot-recorded",
                    seq=1,
                    action="approval:allow",
                    target=request_id,
                    message_id=prompt["event_id"],
                    author_id=owner.mxid,
                    author_name="the owner",
                )
            )
            async with bot.running():
                events = await room_events(
                    owner,
                    waiting.room_id,
                    lambda found: (
                        edits_of(found, prompt["event_id"])
                        and any("All done." in (e["content"].get("body") or "") for e in found)
                    ),
                )
                pending = await bot.services.inbox.pending_presses("matrix", "default")
                result = tool_result(bot, "t1")
        assert [p["event_id"] for p in prompts(events)] == [prompt["event_id"]]
        (edit,) = edits_of(events, prompt["event_id"])
        assert edit.endswith(": ✅ allowed by the owner")
        assert pending == []
        assert result is not None
        assert "ping from the thread" in result


def option(kind: str, label: str) -> ApprovalOption:
    return ApprovalOption(option_id=label.lower(), label=label, kind=kind)  # type: ignore[arg-type]


class TestReactionChoices:
    def test_the_bots_own_choices(self) -> None:
        assert reaction_choices() == [
            ("✅", "allow", "Allow"),
            ("♾️", "session", "Allow for this session"),
            ("❌", "deny", "Deny"),
        ]

    def test_an_external_agents_options_by_kind(self) -> None:
        offered = (
            option("allow_once", "Yes"),
            option("allow_always", "Always"),
            option("reject_once", "No"),
        )
        assert reaction_choices(offered) == [
            ("✅", "opt0", "Yes"),
            ("♾️", "opt1", "Always"),
            ("❌", "opt2", "No"),
        ]

    def test_two_options_of_one_kind_are_numbered(self) -> None:
        offered = (option("allow_once", "Yes"), option("allow_once", "Yes, and log it"))
        assert [emoji for emoji, _, _ in reaction_choices(offered)] == ["1️⃣", "2️⃣"]
