"""ProfileAgentFactory: each session's agent is built from the profile its log names."""

from __future__ import annotations

from typing import Any

from core.agent.assignment import AGENT_ACTIVATED, active_agent
from core.agent.builtin_tools import sleep_tool
from core.agent.factory import ProfileAgentFactory
from core.agent.tools import ToolRegistry
from core.artifacts import builtin as _builtin
from core.artifacts.service import ArtifactService, artifact_tool_handler
from core.clock import FakeClock
from core.config import parse_config
from core.providers.scripted import ScriptedProvider, Step
from core.providers.types import ToolCall
from core.sessions.log import SessionLog

del _builtin

AGENTS = {
    "scout": {
        "display_name": "Scout",
        "system_prompt": "You scout.",
        "model": "small",
        "provider": "other",
        "tools": ["emit_artifact"],
        "artifact_types": ["note"],
    },
}
PROVIDERS = {"other": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}


def factory(
    log: SessionLog,
    default: ScriptedProvider,
    other: ScriptedProvider,
    clock: FakeClock,
    tree: Any = None,
) -> ProfileAgentFactory:
    config = parse_config({"agents": AGENTS, "providers": PROVIDERS}, env={})
    artifacts = ArtifactService(log)

    def handler_for(profile: Any) -> Any:
        return artifact_tool_handler(
            artifacts, get_tree=lambda _c: tree, allowed_types=profile.artifact_types
        )

    return ProfileAgentFactory(
        config,
        {"other": other},
        default,
        ToolRegistry([sleep_tool(clock)]),
        artifacts=handler_for,
    )


def note_call(origin: str) -> ToolCall:
    return ToolCall(
        id="n1",
        name="emit_artifact",
        arguments=f'{{"type": "note", "data": {{"text": "seen"}}, "origin": ["{origin}"]}}',
    )


async def test_no_profile_gets_the_defaults(log: SessionLog, clock: FakeClock) -> None:
    default, other = ScriptedProvider([]), ScriptedProvider([])
    tree = await log.load("plain")
    agent = factory(log, default, other, clock)(tree, log, lambda *_: None)
    assert active_agent(tree) is None
    assert agent.provider is default
    assert agent.tools.names() == ["sleep"]
    assert agent.system_prompt is None


async def test_the_profile_sets_provider_model_prompt_and_exactly_its_tools(
    log: SessionLog, clock: FakeClock
) -> None:
    """The log names scout: its provider, model and prompt, and only the tools it lists."""
    default = ScriptedProvider([])
    tree = await log.load("scouted")
    origin = (await log.append(tree, AGENT_ACTIVATED, {"agent": "scout"})).node_id
    other = ScriptedProvider(
        [
            Step(tool_calls=(note_call(origin),)),
            Step(text="noted"),
        ]
    )
    agent = factory(log, default, other, clock, tree)(tree, log, lambda *_: None)
    assert agent.provider is other
    assert (agent.model, agent.system_prompt, agent.agent_name) == ("small", "You scout.", "scout")
    assert agent.tools.names() == ["emit_artifact"]  # not sleep: the profile does not list it

    await agent.send("look")
    await agent.wait_idle()
    (artifact,) = [e for e in tree.events if e.type == "artifact.note"]
    assert artifact.payload["produced_by"] == "model"
    assert artifact.payload["agent"] == "scout"
    assert other.calls[0][0].content == "You scout."


async def test_agents_of_one_profile_share_a_registry(log: SessionLog, clock: FakeClock) -> None:
    """A registry builds its JSON schemas once; every agent of a profile reuses it."""
    made = factory(log, ScriptedProvider([]), ScriptedProvider([]), clock)
    first, second = await log.load("a"), await log.load("b")
    for tree in (first, second):
        await log.append(tree, AGENT_ACTIVATED, {"agent": "scout"})
    one = made(first, log, lambda *_: None)
    two = made(second, log, lambda *_: None)
    plain = made(await log.load("c"), log, lambda *_: None)
    assert one.tools is two.tools
    assert plain.tools is not one.tools
