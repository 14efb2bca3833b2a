"""The session runtime: rehydration from the log, crash restarts, interrupted turns, eviction."""

from __future__ import annotations

from collections.abc import Callable

from core.agent import Agent, ToolRegistry
from core.agent.events import AgentEvent, ApprovalResolved
from core.agent.messages import INTERRUPTED_RESULT
from core.clock import FakeClock
from core.leases import Leases
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import AgentStarted, SessionRuntime
from core.sessions.log import SessionLog, as_item
from core.sessions.payloads import ApprovalOption, ApprovalRequestedPayload, TurnStartedPayload
from core.sessions.tree import SessionTree
from core.store import Database
from core.subagents.events import SpawnedPayload
from tests.fixtures.agents import GatedTools, make_harness, tools_step
from tests.fixtures.statements import statements
from tests.fixtures.stores import StoreFactory


def factory_for(
    provider: ScriptedProvider, tools: GatedTools
) -> Callable[[SessionTree, SessionLog, Callable], Agent]:
    def build(tree: SessionTree, log: SessionLog, on_crash: Callable) -> Agent:
        return Agent(tree, log, provider, ToolRegistry([tools.tool()]), on_crash=on_crash)

    return build


async def test_rehydrated_session_derives_identical_messages(open_store: StoreFactory) -> None:
    """Closing and reopening the store gives the same provider messages, head and queues."""
    first = await open_store()
    h = await make_harness(
        first, [tools_step("a", "b"), Step(text="steered"), Step(text="follow-up done")]
    )
    await h.agent.send("start")
    await h.tools.wait_started("a")
    await h.agent.steer("change")
    await h.agent.follow_up("later")
    h.tools.release("a")
    await h.idle()
    before = (h.agent.derive_messages(), h.agent.snapshot())
    await first.close()

    reopened = await open_store()
    tree = await SessionLog(reopened).load("agent:test")
    again = Agent(tree, SessionLog(reopened), ScriptedProvider([]))
    assert again.derive_messages() == before[0]
    assert again.snapshot() == before[1]


async def test_crashed_task_is_rebuilt_from_the_log(database: Database) -> None:
    """A bug in the loop ends its task; the runtime rebuilds the agent and resumes follow-ups."""
    tools = GatedTools()
    provider = ScriptedProvider(
        [tools_step("a"), Step(error=RuntimeError("bug in the loop")), Step(text="recovered")]
    )
    runtime = SessionRuntime(SessionLog(database), factory_for(provider, tools))
    agent = await runtime.get("s1")
    await agent.send("go")
    await tools.wait_started("a")
    await agent.follow_up("next")
    tools.release("a")
    await agent.wait_idle()
    await runtime.wait_restarts()

    rebuilt = await runtime.get("s1")
    assert rebuilt is not agent
    await rebuilt.wait_idle()
    types = [e.type for e in rebuilt.tree.events]
    assert "turn_interrupted" in types
    assert [e.payload["text"] for e in rebuilt.tree.events if e.type == "user_message"] == [
        "go",
        "next",
    ]
    assert rebuilt.tree.events[-1].type == "turn_ended"
    assert rebuilt.snapshot().follow_up_queue == ()


async def test_process_restart_marks_running_turn_interrupted(open_store: StoreFactory) -> None:
    """After a crash mid-tool, the turn is marked interrupted, not re-run; queues come back."""
    first = await open_store()
    tools = GatedTools()
    provider = ScriptedProvider([tools_step("a")])
    log = SessionLog(first)
    runtime = SessionRuntime(log, factory_for(provider, tools))
    agent = await runtime.get("s1")
    await agent.send("long job")
    await tools.wait_started("a")
    await agent.follow_up("after the job")
    await log.bookmark(agent.tree, agent.tree.head_id, "before-crash")  # only the log knows
    # The process dies here: nothing is closed, the tool never finishes.

    second = await open_store()
    after = ScriptedProvider([Step(text="follow-up answered")])
    new_tools = GatedTools()
    runtime2 = SessionRuntime(SessionLog(second), factory_for(after, new_tools))
    revived = await runtime2.get("s1")
    await revived.wait_idle()

    events = revived.tree.events
    interrupted = [e for e in events if e.type == "turn_interrupted"]
    assert len(interrupted) == 1
    closing = [e for e in events if e.type == "tool_result" and e.payload["tool_call_id"] == "a"]
    assert closing[0].payload["content"] == INTERRUPTED_RESULT
    assert new_tools.started == []  # the interrupted tool is not run again
    assert "before-crash" in revived.snapshot().bookmarks
    assert [e.payload["text"] for e in events if e.type == "user_message"][-1] == "after the job"
    assert len(after.calls) == 1
    await first.close()


async def test_idle_agents_are_evicted_and_come_back(database: Database) -> None:
    """An agent idle past the eviction period leaves memory; the next get rebuilds it."""
    clock = FakeClock()
    provider = ScriptedProvider([Step(text="hi")])
    runtime = SessionRuntime(
        SessionLog(database),
        factory_for(provider, GatedTools()),
        clock=clock,
        idle_evict_seconds=600,
    )
    agent = await runtime.get("s1")
    await agent.send("hello")
    await agent.wait_idle()
    await clock.advance(599)
    assert runtime.evict_idle() == []
    await clock.advance(1)
    assert runtime.evict_idle() == ["s1"]
    assert runtime.resident() == []
    back = await runtime.get("s1")
    assert back is not agent
    assert back.derive_messages() == agent.derive_messages()


async def test_concurrent_gets_start_one_agent(database: Database) -> None:
    """Two first uses at once rehydrate one agent, and leave no per-key lock behind."""
    import asyncio

    runtime = SessionRuntime(SessionLog(database), factory_for(ScriptedProvider([]), GatedTools()))
    first, second = await asyncio.gather(runtime.get("s1"), runtime.get("s1"))
    assert first is second
    assert runtime._starting == {}


async def test_a_restart_withdraws_a_request_only_the_dead_process_could_answer(
    open_store: StoreFactory,
) -> None:
    """An external agent's permission request dies with its process: the next start records
    it withdrawn and says so (its buttons must not stay in the thread, dead)."""
    first = await open_store()
    log = SessionLog(first)
    tree = await log.load("s1")
    option = ApprovalOption(option_id="once", label="Allow once", kind="allow_once")
    await log.append_many(
        tree,
        [
            as_item(TurnStartedPayload(turn_id="t1", trigger="follow_up")),
            as_item(
                ApprovalRequestedPayload(
                    turn_id="t1",
                    step=0,
                    tool_call_id="acp_1",
                    name="bash",
                    arguments="rm -rf build",
                    options=[option],
                )
            ),
        ],
    )
    assert await log.awaiting_approval() == ["s1"]
    # The process dies here, its agent's process with it.

    second = await open_store()
    seen: list[AgentEvent] = []

    def publish(event: object) -> None:
        if isinstance(event, AgentStarted):
            event.agent.subscribe(seen.append)

    runtime = SessionRuntime(
        SessionLog(second), factory_for(ScriptedProvider([]), GatedTools()), publish=publish
    )
    revived = await runtime.get("s1")

    decided = [e.payload for e in revived.tree.events if e.type == "approval.decided"]
    assert [(d["decision"], d["reason"]) for d in decided] == [("withdrawn", "restart")]
    assert revived.tree.pending_approvals == ()
    assert not revived.running
    (resolved,) = [e for e in seen if isinstance(e, ApprovalResolved)]
    assert (resolved.decision, resolved.reason, resolved.name, resolved.arguments) == (
        "withdrawn",
        "restart",
        "bash",
        "rm -rf build",
    )
    assert await SessionLog(second).awaiting_approval() == []
    await first.close()


_SPAWNED = SpawnedPayload(
    agent=None, mode="run", thread=True, task="t", parent_session_key=None, requested_by="u"
)


async def test_a_new_session_starts_from_its_tree_without_reading_the_store(
    database: Database,
) -> None:
    """A spawn's new session: the runtime takes the tree its first events were written
    through, reads nothing back, and the agent then writes on as if it had loaded it."""
    log = SessionLog(database)
    provider = ScriptedProvider([Step(text="hi")])
    runtime = SessionRuntime(log, factory_for(provider, GatedTools()))
    tree = SessionTree("subagent:new")
    await log.append_many(tree, [as_item(_SPAWNED)])
    with statements(database) as sent:
        agent = await runtime.start_new(tree, leased=True)
    assert sent == []
    assert agent.tree is tree
    assert runtime.peek("subagent:new") is agent
    assert await runtime.get("subagent:new") is agent
    await agent.send("hello")
    await agent.wait_idle()
    loaded = await SessionLog(database).load("subagent:new")
    assert [e.node_id for e in loaded.events] == [e.node_id for e in agent.tree.events]


async def test_a_new_session_already_resident_is_not_started_twice(database: Database) -> None:
    """Someone wrote in the new thread first and started the agent: that one is kept."""
    log = SessionLog(database)
    runtime = SessionRuntime(log, factory_for(ScriptedProvider([]), GatedTools()))
    tree = SessionTree("subagent:new")
    await log.append_many(tree, [as_item(_SPAWNED)])
    first = await runtime.get("subagent:new")
    assert await runtime.start_new(tree, leased=True) is first


async def test_a_new_session_takes_its_lease_unless_the_caller_did(
    database: Database, clock: FakeClock
) -> None:
    owner = Leases(database, owner="a", clock=clock)
    runtime = SessionRuntime(
        SessionLog(database), factory_for(ScriptedProvider([]), GatedTools()), leases=owner
    )
    assert runtime.leases is owner
    await runtime.start_new(SessionTree("s1"))
    await runtime.start_new(SessionTree("s2"), leased=True)
    assert await owner.holders("session") == {"s1": "a"}
