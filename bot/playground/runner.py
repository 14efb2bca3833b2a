"""The playground's bot: the real bot's services and client, pointed at the playground's Discord.

Nothing is simulated here: the fake Discord (:mod:`fakediscord`) is reached over
loopback through the same ``api_base_url`` / ``gateway_url`` mechanism a proxy would
use, the unchanged discord.py client connects to it, and the bot keeps its state in
its own SQLite file. What the bot needs to know of that Discord (its addresses, the
playground guild, the bot's token) is a :class:`BotLink`, which the host hands over:
on a pipe to the bot's own process (:mod:`bot.playground.child`), or directly when a
test runs the bot inside its own process.

A :class:`PlaygroundBot` is one run, start to stop, as one process of the real bot
would be: a new run opens the store again and catches up on what was written while
none ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from adapters.discord.endpoints import Endpoints, use_endpoints
from adapters.discord.manager import ManagerRegistry
from bot.app import shut_down
from bot.client import ThreadboundClient
from bot.wiring import Services, build_services
from core.agent.usage import ModelInfo
from core.config import AcpAgentConfig, AgentProfile, Config, McpServerConfig
from core.errors import ThreadboundError
from core.providers.demo import DemoProvider
from core.providers.types import Provider

__all__ = [
    "DEMO_ACP_AGENTS",
    "DEMO_AGENTS",
    "DEMO_MCP_SERVERS",
    "DEMO_MODEL_INFO",
    "BotLink",
    "DiscordAddresses",
    "PlaygroundBot",
    "PlaygroundError",
    "demo_provider",
    "playground_config",
]

STOP_CLIENT_SECONDS = 10.0
"""How long a stopping run waits for the client's task once it was told to close."""


class PlaygroundError(ThreadboundError):
    """The playground cannot start (its port is taken, its state file is unreadable, the
    bot stopped before it was ready)."""


DEMO_AGENTS = {
    "scout": AgentProfile(
        display_name="Scout",
        tools=["sleep", "spawn_subagent", "mcp:demo"],
        handoff_to=["writer"],
    ),
    "writer": AgentProfile(display_name="Writer", tools=["sleep"], user_startable=False),
    "coder": AgentProfile(display_name="Coder", acp="demo"),
}
"""Agents for a file with no ``[agents]``: Scout starts, and hands off to Writer, so the
brief button and the Accept / Reject buttons can be tried; Scout has the demo MCP
server's tools (a tool line; "note" in the task asks for approval). Coder is an
external agent over ACP (:mod:`bot.playground.demo_agent`): a plan, streamed words
and a permission prompt with the agent's own options."""

DEMO_ACP_AGENTS = {
    "demo": AcpAgentConfig(
        command=["python", str(Path(__file__).with_name("demo_agent.py"))],
        workspace_dir="playground-workspaces",
    )
}
"""The demo external agent, added for the demo agents (a file with no ``[agents]``)."""

DEMO_MCP_SERVERS = {
    "demo": McpServerConfig(
        command=[sys.executable, str(Path(__file__).with_name("demo_tools.py"))],
        require_approval=["write_note"],
    )
}
"""The demo MCP server (:mod:`bot.playground.demo_tools`), added for the demo agents
(a file with no ``[agents]``)."""

DEMO_MODEL_INFO = ModelInfo(vision=True)
"""The demo model takes images (it names them in its answer), so an upload can be tried."""


@dataclass(frozen=True, slots=True)
class BotLink:
    """What the bot needs to reach the playground's Discord; ``token`` is a secret.

    ``min_edit_interval`` is the client's pace of stream edits (tests make it short).
    """

    base_url: str
    gateway_url: str
    guild_id: int
    bot_user_id: int
    token: str
    min_edit_interval: float = 1.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> BotLink:
        """Read a link; a malformed one raises ``ValueError`` (never naming the token)."""
        try:
            data: dict[str, Any] = json.loads(text)
            return cls(
                base_url=str(data["base_url"]),
                gateway_url=str(data["gateway_url"]),
                guild_id=int(data["guild_id"]),
                bot_user_id=int(data["bot_user_id"]),
                token=str(data["token"]),
                min_edit_interval=float(data.get("min_edit_interval", 1.0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError("the playground's link to its Discord is malformed") from None


class DiscordAddresses(Protocol):
    """Anything with the fake Discord's two addresses (a FakeDiscord, a BotLink)."""

    @property
    def base_url(self) -> str: ...

    @property
    def gateway_url(self) -> str: ...


def playground_config(config: Config, fake: DiscordAddresses, guild_id: int) -> Config:
    """The bot's configuration inside the playground.

    Only what must differ changes: Discord's addresses become the fake's, commands
    sync to the playground guild (instantly), the store is the playground's own
    SQLite file, spawnSubagentSessions is on unless the file decided it, and a
    file with no agents gets :data:`DEMO_AGENTS`.
    """
    discord_level = config.channels.discord
    bindings = discord_level.thread_bindings
    if bindings.spawn_subagent_sessions is None:
        bindings = bindings.model_copy(update={"spawn_subagent_sessions": True})
    channels = config.channels.model_copy(
        update={"discord": discord_level.model_copy(update={"thread_bindings": bindings})}
    )
    endpoints = config.discord.model_copy(
        update={
            "api_base_url": f"{fake.base_url}/api/v10",
            "gateway_url": fake.gateway_url,
            "command_guild_ids": [guild_id],
        }
    )
    store = config.store.model_copy(update={"url": f"sqlite:///{config.playground.store_file}"})
    agents = config.agents or dict(DEMO_AGENTS)
    servers = config.mcp_servers
    external = config.acp_agents
    if not config.agents:  # the demo agents use the demo server and agent
        servers = {**DEMO_MCP_SERVERS, **servers}
        external = {**DEMO_ACP_AGENTS, **external}
    return config.model_copy(
        update={
            "channels": channels,
            "discord": endpoints,
            "store": store,
            "agents": agents,
            "mcp_servers": servers,
            "acp_agents": external,
        }
    )


def demo_provider(config: Config) -> DemoProvider | None:
    """The demo model when the file has no ``[providers]`` table; else None (the
    configured provider is built with the services)."""
    if config.providers:
        return None
    settings = config.playground
    return DemoProvider(sleep_seconds=settings.demo_sleep_seconds, steps=settings.demo_steps)


class PlaygroundBot:
    """One run of the bot against the playground's Discord: :meth:`start`, then :meth:`stop`.

    Args:
        config: the loaded configuration (made into :func:`playground_config` here).
        link: where the playground's Discord is, and the bot's token there.
        provider: the model; default: the demo model without a ``[providers]`` table.
    """

    def __init__(self, config: Config, link: BotLink, *, provider: Provider | None = None) -> None:
        self.config = config
        self.link = link
        self.provider = provider if provider is not None else demo_provider(config)
        self.demo = isinstance(self.provider, DemoProvider)
        self.services: Services | None = None
        self.client: ThreadboundClient | None = None
        self.client_task: asyncio.Task[None] | None = None
        """The client's run: it ending means the bot disconnected for good."""
        self._maintenance: asyncio.Task[None] | None = None
        self._previous: Endpoints | None = None

    def counts(self) -> tuple[int, int]:
        """Live sessions and bindings (the progress line's figures)."""
        if self.services is None:
            return 0, 0
        return len(self.services.runtime.resident()), len(self.services.bindings)

    async def start(self) -> None:
        """Build the services and connect; returns once the client runs (not yet ready:
        the fake's gateway says when). On failure, what started is stopped."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        link = self.link
        config = playground_config(self.config, link, link.guild_id)
        store = self.config.base_dir / self.config.playground.store_file
        store.parent.mkdir(parents=True, exist_ok=True)
        self.services = await build_services(
            config,
            provider=self.provider,
            provider_info=DEMO_MODEL_INFO if self.demo else None,
            single_process=True,
        )
        self._previous = use_endpoints(f"{link.base_url}/api/v10", link.gateway_url)
        account_id = config.account_ids()[0]  # the playground has one bot user
        self.client = ThreadboundClient(
            account_id,
            self.services,
            ManagerRegistry(),
            min_edit_interval=link.min_edit_interval,
        )
        self.client_task = asyncio.create_task(
            self.client.start(link.token), name="playground-client"
        )
        self._maintenance = asyncio.create_task(
            self.services.maintain(), name="playground-maintenance"
        )

    async def stop(self) -> None:
        """Stop as the real bot does on SIGTERM (see :func:`bot.app.shut_down`); safe after a
        failed start and safe to call twice."""
        if self.client is not None:
            if self.services is not None:
                await shut_down(self.services, [self.client])
            else:
                await self.client.close()
            if self.client_task is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    async with asyncio.timeout(STOP_CLIENT_SECONDS):
                        await asyncio.gather(self.client_task, return_exceptions=True)
            self.client = None
        if self._maintenance is not None:
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
            self._maintenance = None
        if self.services is not None:
            await self.services.close()
            self.services = None
        if self._previous is not None:
            use_endpoints(self._previous.api_base_url, self._previous.gateway_url)
            self._previous = None
