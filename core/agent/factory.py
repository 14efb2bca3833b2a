"""Building a session's agent from the profile that runs it.

The session log says which agent runs it (:mod:`core.agent.assignment`);
the profile (``[agents.<id>]``) gives that agent's provider, model, system
prompt and tools. A session with no agent recorded, or a config with no
profiles, gets the defaults: the first provider, no prompt, and the tools
``[agent] tools`` lists (unset: the base tools plus ``spawn_subagent`` and
``schedule_wakeup``).
``mcp:`` entries add an MCP server's tools (:mod:`core.agent.mcp_tools`).
A profile with ``acp`` is an external agent: it brings its own model and tools,
and its turns are run by what :class:`ExternalAgents` gives (:mod:`core.acp`).

Tools that act on the bot (spawning, artifacts) are given to the constructor
as handlers (``spawn``, ``artifacts``): the ports through which an agent's tool
reaches the services. Those services are built after the runtime that owns this
factory, so the wiring hands over handlers that find them when a tool runs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from core.agent.agent import Agent, AgentSettings
from core.agent.assignment import active_agent
from core.agent.builtin_tools import (
    ArtifactHandler,
    SpawnHandler,
    WakeupHandler,
    emit_artifact_tool,
    schedule_wakeup_tool,
    spawn_subagent_tool,
)
from core.agent.loop import TurnRunner
from core.agent.mcp_tools import mcp_sources
from core.agent.tools import Tool, ToolRegistry
from core.agent.usage import ModelInfo
from core.clock import Clock, SystemClock
from core.config import AgentProfile, Config
from core.errors import ProviderError
from core.mcp import McpServers
from core.providers.types import ChatMessage, Provider, ProviderEvent, ToolSpec
from core.sessions.log import SessionLog
from core.sessions.tree import SessionTree

__all__ = ["ArtifactHandlerFor", "ExternalAgents", "ProfileAgentFactory"]

ArtifactHandlerFor = Callable[[AgentProfile], ArtifactHandler]
"""The ``emit_artifact`` handler for one profile (it knows the types that profile allows)."""


class ExternalAgents(Protocol):
    """Runs the turns of sessions whose profile names an external agent."""

    def turns_for(self, profile: AgentProfile, session_key: str) -> TurnRunner: ...


class _OwnModel:
    """The provider of an external agent's session: there is none, the agent brings its
    own model; anything that would call one says so."""

    def __init__(self, agent: str) -> None:
        self.name = f"acp:{agent}"
        self._agent = agent

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        raise ProviderError(
            f"this session runs the external agent {self._agent!r}, which uses its own "
            "model: the bot calls none for it"
        )
        yield  # pragma: no cover - makes this an async generator


class ProfileAgentFactory:
    """An ``AgentFactory`` (see :mod:`core.runtime`) that honours agent profiles."""

    def __init__(
        self,
        config: Config,
        providers: Mapping[str, Provider],
        default_provider: Provider,
        base_tools: ToolRegistry,
        *,
        provider_override: Provider | None = None,
        override_info: ModelInfo | None = None,
        mcp: McpServers | None = None,
        clock: Clock | None = None,
        load_image: Callable[[str], bytes] | None = None,
        external: ExternalAgents | None = None,
        spawn: SpawnHandler | None = None,
        artifacts: ArtifactHandlerFor | None = None,
        wakeup: WakeupHandler | None = None,
    ) -> None:
        """``spawn``: what ``spawn_subagent`` calls (no such tool without it);
        ``artifacts``: the ``emit_artifact`` handler for a profile (none without it);
        ``wakeup``: what ``schedule_wakeup`` calls (no such tool without it)."""
        self._load_image = load_image
        self._external = external
        self._config = config
        self._mcp = mcp
        self._clock: Clock = clock or SystemClock()
        self._providers = providers
        self._default = default_provider
        self._override = provider_override
        self._override_info = override_info
        self._base = base_tools
        self._spawn: Tool | None = spawn_subagent_tool(spawn) if spawn is not None else None
        self._wakeup: Tool | None = schedule_wakeup_tool(wakeup) if wakeup is not None else None
        self._artifacts = artifacts
        # One registry per profile, shared by its agents: a registry builds its JSON
        # schemas once, and building them is a millisecond per tool.
        self._registries: dict[str | None, ToolRegistry] = {}

    def __call__(
        self, tree: SessionTree, log: SessionLog, on_crash: Callable[[Agent, BaseException], None]
    ) -> Agent:
        agent_id = active_agent(tree)
        profile = self._config.agents.get(agent_id) if agent_id else None
        if profile is not None and profile.acp and self._external is not None:
            return self._external_agent(tree, log, on_crash, agent_id, profile)
        if profile is None:
            settings = AgentSettings.from_config(
                self._config.agent,
                agent_name=agent_id,
                model_info=self._info_for(None),
                load_image=self._load_image,
            )
            provider = self._override or self._default
            tools = self._registry(None, self._default_tools)
        else:
            settings = AgentSettings.from_config(
                self._config.agent,
                system_prompt=profile.system_prompt or None,
                model=profile.model or None,
                agent_name=agent_id,
                model_info=self._info_for(profile),
                load_image=self._load_image,
            )
            provider = self._provider_for(profile)
            tools = self._registry(agent_id, lambda: self._tools_for(profile))
        chosen = tree.model_choice
        if chosen is not None and chosen[0] in self._config.providers:  # /model, kept in the log
            provider, info = self.model_choice(*chosen)
            settings = replace(settings, model=chosen[1], model_info=info)
        return Agent(tree, log, provider, tools, settings, on_crash=on_crash, clock=self._clock)

    def _external_agent(
        self,
        tree: SessionTree,
        log: SessionLog,
        on_crash: Callable[[Agent, BaseException], None],
        agent_id: str | None,
        profile: AgentProfile,
    ) -> Agent:
        assert self._external is not None
        settings = AgentSettings.from_config(
            self._config.agent, agent_name=agent_id, acp=profile.acp, load_image=self._load_image
        )
        return Agent(
            tree,
            log,
            _OwnModel(profile.acp),
            ToolRegistry(),
            settings,
            on_crash=on_crash,
            clock=self._clock,
            turns=self._external.turns_for(profile, tree.session_key),
        )

    def models(self) -> list[tuple[str, str]]:
        """``(provider, model)`` of every configured provider: what ``/model`` offers."""
        return [(name, cfg.model) for name, cfg in self._config.providers.items()]

    def model_choice(self, provider: str, model: str) -> tuple[Provider, ModelInfo]:
        """The provider object and model facts for a ``/model`` choice.

        Raises:
            KeyError: ``provider`` is not a configured provider.
        """
        config = self._config.providers[provider]
        return self._override or self._providers[provider], ModelInfo.of(config)

    def _registry(self, key: str | None, build: Callable[[], ToolRegistry]) -> ToolRegistry:
        registry = self._registries.get(key)
        if registry is None:
            registry = self._registries[key] = build()
        return registry

    def _info_for(self, profile: AgentProfile | None) -> ModelInfo:
        """The window and prices of the provider the profile (or the default) uses."""
        name = profile.provider if profile is not None and profile.provider else None
        if name is None:
            name = next(iter(self._config.providers), None)
        config = self._config.providers.get(name) if name is not None else None
        if config is not None:
            return ModelInfo.of(config)
        return self._override_info or ModelInfo()

    def _provider_for(self, profile: AgentProfile) -> Provider:
        if self._override is not None:
            return self._override
        if profile.provider:
            return self._providers[profile.provider]  # checked when the config loaded
        return self._default

    def _default_tools(self) -> ToolRegistry:
        listed = self._config.agent.tools
        if listed is not None:
            return self._listed(listed, None)
        tools = list(self._base)
        tools += [tool for tool in (self._spawn, self._wakeup) if tool is not None]
        return ToolRegistry(tools, result_max_chars=self._config.agent.tool_result_max_chars)

    def _tools_for(self, profile: AgentProfile) -> ToolRegistry:
        return self._listed(profile.tools, profile)

    def _listed(self, names: list[str], profile: AgentProfile | None) -> ToolRegistry:
        """Exactly the tools listed (those whose feature is wired in), MCP servers' included."""
        available = {tool.name: tool for tool in self._base}
        for tool in (self._spawn, self._wakeup):
            if tool is not None:
                available[tool.name] = tool
        if self._artifacts is not None and profile is not None:
            available["emit_artifact"] = emit_artifact_tool(self._artifacts(profile))
        sources = (
            mcp_sources(self._mcp, self._config.mcp_servers, names) if self._mcp is not None else []
        )
        return ToolRegistry(
            (available[name] for name in names if name in available),
            sources=sources,
            result_max_chars=self._config.agent.tool_result_max_chars,
        )
