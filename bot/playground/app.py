"""The playground: the real bot against a local Discord, with a web page to use it.

``python -m bot`` without a Discord token (or with ``--playground``) lands here.
Nothing is simulated on the bot's side: the fake Discord from :mod:`fakediscord`
listens on loopback with REST and a gateway, the unchanged discord.py client
connects to it through the same ``api_base_url`` / ``gateway_url`` mechanism a
proxy would use, and the bot keeps its state in its own SQLite file. The web
page (:mod:`bot.playground.web`) acts as Discord's client for a few local users.

At start the playground makes sure its world exists (a guild with #general and
#research, a member "alice" and an "admin"), loaded from ``[playground]
state_file`` when it was saved before. ``spawnSubagentSessions`` is switched on
unless the file sets it, because threads are what there is to see. Without a
``[providers]`` table the demo model answers (:mod:`core.providers.demo`).

Only the first configured account runs here (the playground has one bot user).
Shutdown runs in reverse: the page and progress line stop, the client
disconnects, maintenance stops, the fake's state is saved and the fake stops,
then the services flush and close the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

import structlog

from adapters.discord.endpoints import Endpoints, use_endpoints
from adapters.discord.manager import ManagerRegistry
from bot.app import shut_down
from bot.client import ThreadboundClient
from bot.playground.progress import Counts, Progress
from bot.playground.view import World
from bot.playground.web import PlaygroundWeb
from bot.wiring import Services, build_services
from core.agent.usage import ModelInfo
from core.config import AcpAgentConfig, AgentProfile, Config, McpServerConfig
from core.errors import ThreadboundError
from core.logging import configure_logging, shutdown_logging
from core.providers.demo import DemoProvider
from core.providers.types import Provider
from fakediscord import FakeDiscord
from fakediscord.persistence import load_state, save_state

__all__ = [
    "ADMIN_NAME",
    "CHANNEL_NAMES",
    "GUILD_NAME",
    "HOST",
    "MEMBER_NAME",
    "Playground",
    "PlaygroundError",
    "playground_config",
    "run_playground",
]

HOST = "127.0.0.1"
GUILD_NAME = "Playground"
CHANNEL_NAMES = ("general", "research")
MEMBER_NAME, ADMIN_NAME = "alice", "admin"
BOT_NAME = "threadbound"
SAVE_EVERY_SECONDS = 5.0
KEEP_REQUESTS = 2000
READY_TIMEOUT = 30.0

_log = structlog.get_logger("bot.playground")


class PlaygroundError(ThreadboundError):
    """The playground cannot start (its port is taken, its state file is unreadable)."""


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


def playground_config(config: Config, fake: FakeDiscord, guild_id: int) -> Config:
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


def _seed(fake: FakeDiscord) -> tuple[str, World]:
    """Make sure the bot, the guild, its channels and the two users exist (idempotent).

    Returns the bot's token and the world made.
    """
    state = fake.state
    if state.bots:
        token, account = next(iter(state.bots.items()))
        bot = state.users[account.user_id]
    else:
        token = secrets.token_urlsafe(24)
        bot = fake.add_bot(token, BOT_NAME)
    guild = next((g for g in state.guilds.values() if g.name == GUILD_NAME), None)
    if guild is None:
        guild = fake.add_guild(GUILD_NAME)
    existing = {c.name for c in state.guild_channels(guild.id)}
    for name in CHANNEL_NAMES:
        if name not in existing:
            fake.add_text_channel(guild, name)
    members = []
    for name, admin in ((MEMBER_NAME, False), (ADMIN_NAME, True)):
        user = next(
            (state.users[uid] for uid in guild.members if state.users[uid].username == name), None
        )
        members.append(user or fake.add_member(guild, name, admin=admin))
    world = World(guild_id=guild.id, bot_user_id=bot.id, member_ids=tuple(u.id for u in members))
    return token, world


class Playground:
    """The fake Discord, the bot connected to it, and the web page; start, then stop.

    Args:
        config: the loaded configuration (its ``[playground]`` table, flags, agents).
        provider: the model; default: the demo model when no ``[providers]`` table
            exists, else the configured provider.
        port: overrides ``[playground] port`` (tests pass 0).
        progress: where the progress line goes; None: no progress line.
    """

    def __init__(
        self,
        config: Config,
        *,
        provider: Provider | None = None,
        port: int | None = None,
        progress: TextIO | None = None,
        min_edit_interval: float = 1.0,
    ) -> None:
        self.config = config
        self.settings = config.playground
        self.port = self.settings.port if port is None else port
        if provider is None and not config.providers:
            provider = DemoProvider(
                sleep_seconds=self.settings.demo_sleep_seconds, steps=self.settings.demo_steps
            )
        self.provider = provider
        self.demo = isinstance(provider, DemoProvider)
        self.fake = FakeDiscord(wait_timeout=READY_TIMEOUT, keep_requests=KEEP_REQUESTS)
        self._progress_stream = progress
        self._min_edit_interval = min_edit_interval
        self.services: Services | None = None
        self.client: ThreadboundClient | None = None
        self.web: PlaygroundWeb | None = None
        self.world: World | None = None
        self.url = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._client_run: asyncio.Task[None] | None = None
        self._previous: Endpoints | None = None
        self._progress: Progress | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def state_path(self) -> Path | None:
        if not self.settings.state_file:
            return None
        return self.config.base_dir / self.settings.state_file

    @property
    def client_task(self) -> asyncio.Task[None] | None:
        """The discord.py client's run; it ending means the bot disconnected for good."""
        return self._client_run

    def counts(self) -> Counts:
        """Live sessions, bindings, and messages the bot or its webhooks created."""
        services, world = self.services, self.world
        if services is None or world is None:
            return Counts(0, 0, 0)
        deliveries = sum(
            1
            for m in self.fake.state.messages.values()
            if m.webhook_id is not None or m.author_id == world.bot_user_id
        )
        return Counts(len(services.runtime.resident()), len(services.bindings), deliveries)

    async def start(self) -> str:
        """Start everything; returns the page's URL. On failure, what started is stopped."""
        try:
            return await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> str:
        path = self.state_path
        if path is not None:
            try:
                load_state(self.fake.state, path)
            except ValueError as exc:
                raise PlaygroundError(f"{exc}; move the file away to start afresh") from None
        token, self.world = _seed(self.fake)
        await self.fake.start()
        self._stack.push_async_callback(self.fake.stop)
        self.web = PlaygroundWeb(self.fake, self.world, host=HOST, port=self.port)
        try:
            self.url = await self.web.start()  # first: a taken port fails before the bot starts
        except OSError as exc:
            self.web = None
            raise PlaygroundError(
                f"cannot listen on {HOST}:{self.port} ({exc.strerror or exc}); "
                "set another port in [playground] port (0 picks a free one)"
            ) from None
        config = playground_config(self.config, self.fake, self.world.guild_id)
        store = self.config.base_dir / self.settings.store_file
        store.parent.mkdir(parents=True, exist_ok=True)
        self.services = await build_services(
            config,
            provider=self.provider,
            provider_info=DEMO_MODEL_INFO if self.demo else None,
            single_process=True,
        )
        self._stack.push_async_callback(self.services.close)
        self._previous = use_endpoints(f"{self.fake.base_url}/api/v10", self.fake.gateway_url)
        account_id = config.account_ids()[0]
        self.client = ThreadboundClient(
            account_id, self.services, ManagerRegistry(), min_edit_interval=self._min_edit_interval
        )
        await self._connect(token, self.world.bot_user_id)
        self._tasks.append(
            asyncio.create_task(
                self.services.maintain(),
                name="playground-maintenance",
            )
        )
        if path is not None:
            self._tasks.append(asyncio.create_task(self._save_loop(path), name="playground-save"))
        if self._progress_stream is not None:
            self._progress = Progress(self._progress_stream, self.counts, self.url)
            self._progress.start()
        _log.info(
            "playground.started",
            url=self.url,
            demo_model=self.demo,
            live_bindings=len(self.services.bindings),
        )
        return self.url

    async def _connect(self, token: str, bot_user_id: int) -> None:
        """Start the client and return once it is ready (or raise why it stopped)."""
        assert self.client is not None
        self._client_run = asyncio.create_task(self.client.start(token), name="playground-client")
        if await self.fake.wait_ready_or_stopped(bot_user_id, self._client_run) is None:
            raise PlaygroundError("the bot stopped before it was ready in the playground")

    async def _save_loop(self, path: Path) -> None:
        """Save the fake's state a few seconds after it changes (and at shutdown)."""
        while True:
            await self.fake.state.changed.wait_next()
            await asyncio.sleep(SAVE_EVERY_SECONDS)  # batch a burst of changes into one write
            self._save(path)

    def _save(self, path: Path) -> None:
        try:
            save_state(self.fake.state, path)
        except OSError as exc:
            _log.warning("playground.save_failed", path=str(path), error=str(exc))

    async def stop(self) -> None:
        """Stop in reverse order; safe after a failed start and safe to call twice."""
        if self._progress is not None:
            await self._progress.stop()
            self._progress = None
        if self.web is not None:
            await self.web.stop()
            self.web = None
        if self.client is not None:
            if self.services is not None:
                await shut_down(self.services, [self.client])
            else:
                await self.client.close()
            if self._client_run is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    async with asyncio.timeout(10):
                        await asyncio.gather(self._client_run, return_exceptions=True)
            self.client = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        path = self.state_path
        if path is not None and self.world is not None:
            self._save(path)
        await self._stack.aclose()
        if self._previous is not None:
            use_endpoints(self._previous.api_base_url, self._previous.gateway_url)
            self._previous = None

    async def __aenter__(self) -> Playground:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()


def _say(text: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    stream.write(text + "\n")
    stream.flush()


async def run_playground(config: Config, *, reason: str = "") -> int:
    """Run the playground until SIGINT or SIGTERM; returns the exit status."""
    console = config.logging.console and not sys.stderr.isatty()  # a TTY shows the progress line
    tokens = [t for a in config.account_ids() if (t := config.account_token(a))]
    configure_logging(
        level=config.logging.level,
        json_path=config.json_log_path(),
        console=console,
        secrets=tokens,  # a token may be set while --playground is forced: never log it
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    playground = Playground(config, progress=sys.stderr)
    try:
        if reason:
            _say(f"threadbound: {reason}")
        try:
            url = await playground.start()
        except PlaygroundError as exc:
            _say(f"threadbound: {exc}", sys.stderr)
            return 2
        model = (
            "the demo model (labelled [demo model]; add a [providers.<name>] table for a real one)"
            if playground.demo
            else "the configured model"
        )
        _say(f"threadbound playground: open {url}")
        _say(
            f"  a local Discord with #{' #'.join(CHANNEL_NAMES)}; act as {MEMBER_NAME} or "
            f"{ADMIN_NAME}; answers come from {model}. Ctrl-C stops."
        )
        log_path = config.json_log_path()
        if log_path is not None and not console:
            _say(f"  logs: {log_path}")
        waiter = asyncio.create_task(stop.wait())
        watched: set[asyncio.Future[Any]] = {waiter}
        if playground.client_task is not None:
            watched.add(playground.client_task)
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        return 0 if stop.is_set() else 1
    finally:
        await playground.stop()
        _log.info("bot.stopped")
        shutdown_logging()
