"""The playground: the real bot against a local Discord, with a web page to use it.

``python -m bot`` without a Discord token (or with ``--playground``) lands here.
This process, the *host*, serves the fake Discord (:mod:`fakediscord`, REST and a
gateway on loopback) and the page (:mod:`bot.playground.web`), which acts as
Discord's client for a few local users. The bot runs in a process of its own
(:mod:`bot.playground.child`) and connects to the fake over loopback exactly as it
would to Discord. So the page and the Discord outlive the bot: stop or kill it from
the page (:mod:`bot.playground.supervisor`), and the member list shows it offline
while people keep writing; start it again, and it catches up on what was written,
once, as it would after any downtime.

At start the host makes sure its world exists (a guild with #general and #research,
a member "alice" and an "admin", the bot with the Pin Messages permission), loaded
from ``[playground] state_file`` when it was saved before. The fake saves every
change to that file before it answers the request that made it (a journal beside
the file; :class:`fakediscord.persistence.Journal`), so a ``kill -9`` of the bot or
of the host loses nothing either had been told was done.

Shutdown runs in reverse: the progress line and the page stop, the bot stops
cleanly (SIGTERM; killed if it takes too long), then the fake stops and folds its
journal into the state file.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import sys
from pathlib import Path
from typing import TextIO

import structlog

from bot.playground.progress import Counts, Progress
from bot.playground.runner import (
    DEMO_AGENTS,
    BotLink,
    PlaygroundError,
    demo_provider,
    playground_config,
)
from bot.playground.supervisor import BotControl, BotProcess, InProcessBot
from bot.playground.view import World
from bot.playground.web import PlaygroundWeb
from bot.wiring import Services
from core.config import Config
from core.logging import configure_logging, shutdown_logging
from core.providers.demo import DemoProvider
from core.providers.types import Provider
from fakediscord import FakeDiscord
from fakediscord.permissions import PIN_MESSAGES

__all__ = [
    "ADMIN_NAME",
    "CHANNEL_NAMES",
    "DEMO_AGENTS",
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
KEEP_REQUESTS = 2000
READY_TIMEOUT = 120.0
"""How long the bot may take to connect: a process of its own imports the whole bot
first, which a loaded machine does slowly."""

_log = structlog.get_logger("bot.playground")


def _seed(fake: FakeDiscord) -> tuple[str, World]:
    """Make sure the bot (allowed to pin), the guild, its channels and the two users exist
    (idempotent).

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
    role = next(r for r in guild.roles.values() if r.managed and r.bot_id == bot.id)
    if not role.permissions & PIN_MESSAGES:  # as a guild that invited it with Pin Messages
        fake.set_bot_permissions(guild, bot, role.permissions | PIN_MESSAGES)
    world = World(guild_id=guild.id, bot_user_id=bot.id, member_ids=tuple(u.id for u in members))
    return token, world


class Playground:
    """The fake Discord, the web page, and the bot connected to them; start, then stop.

    Args:
        config: the loaded configuration (its ``[playground]`` table, flags, agents).
        provider: the model of an in-process bot; default: the demo model when no
            ``[providers]`` table exists, else the configured provider.
        port: overrides ``[playground] port`` (tests pass 0).
        progress: where the progress line goes; None: no progress line.
        min_edit_interval: the bot's pace of stream edits (tests make it short).
        bot_process: run the bot in a process of its own (what ``python -m bot`` does:
            the page's Kill then works); False runs it in this process, where tests
            can read its :attr:`services`. The process loads ``config.config_path``.
    """

    def __init__(
        self,
        config: Config,
        *,
        provider: Provider | None = None,
        port: int | None = None,
        progress: TextIO | None = None,
        min_edit_interval: float = 1.0,
        bot_process: bool = False,
    ) -> None:
        self.config = config
        self.settings = config.playground
        self.port = self.settings.port if port is None else port
        self.provider = provider if provider is not None else demo_provider(config)
        self.demo = isinstance(self.provider, DemoProvider)
        self.fake = FakeDiscord(wait_timeout=READY_TIMEOUT, keep_requests=KEEP_REQUESTS)
        self._progress_stream = progress
        self._min_edit_interval = min_edit_interval
        self._bot_process = bot_process
        self.bot: BotControl | None = None
        self.web: PlaygroundWeb | None = None
        self.world: World | None = None
        self.url = ""
        self._progress: Progress | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def state_path(self) -> Path | None:
        if not self.settings.state_file:
            return None
        return self.config.base_dir / self.settings.state_file

    @property
    def services(self) -> Services | None:
        """The bot's services while it runs in this process; None otherwise."""
        return self.bot.services if isinstance(self.bot, InProcessBot) else None

    def counts(self) -> Counts:
        """Live sessions and bindings (as the bot tells), and messages the bot or its
        webhooks created; and whether the bot is online."""
        world = self.world
        if world is None or self.bot is None:
            return Counts(0, 0, 0)
        deliveries = sum(
            1
            for m in self.fake.state.messages.values()
            if m.webhook_id is not None or m.author_id == world.bot_user_id
        )
        sessions, bindings = self.bot.counts()
        return Counts(sessions, bindings, deliveries, bot=self.fake.presence(world.bot_user_id))

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
                self.fake.persist(path)
            except ValueError as exc:
                raise PlaygroundError(f"{exc}; move the file away to start afresh") from None
            self.fake.on_save_failed = self._save_failed
        token, self.world = _seed(self.fake)
        self.fake.commit()
        await self.fake.start()
        self._stack.push_async_callback(self.fake.stop)
        link = BotLink(
            base_url=self.fake.base_url,
            gateway_url=self.fake.gateway_url,
            guild_id=self.world.guild_id,
            bot_user_id=self.world.bot_user_id,
            token=token,
            min_edit_interval=self._min_edit_interval,
        )
        self.bot = self._control(link)
        self.web = PlaygroundWeb(self.fake, self.world, host=HOST, port=self.port, bot=self.bot)
        try:
            self.url = await self.web.start()  # first: a taken port fails before the bot starts
        except OSError as exc:
            self.web = None
            raise PlaygroundError(
                f"cannot listen on {HOST}:{self.port} ({exc.strerror or exc}); "
                "set another port in [playground] port (0 picks a free one)"
            ) from None
        await self.bot.start()
        await self._wait_ready()
        if self._progress_stream is not None:
            self._progress = Progress(self._progress_stream, self.counts, self.url)
            self._progress.start()
        _log.info(
            "playground.started",
            url=self.url,
            demo_model=self.demo,
            live_bindings=self.bot.counts()[1],
        )
        return self.url

    def _control(self, link: BotLink) -> BotControl:
        notify = self.fake.state.changed.notify  # the page hears of it
        if self._bot_process:
            return BotProcess(link, config_path=self.config.config_path, on_change=notify)
        return InProcessBot(self.config, link, provider=self.provider, on_change=notify)

    async def _wait_ready(self) -> None:
        """Return once the bot's client is ready on the fake's gateway, or say why not."""
        assert self.bot is not None
        assert self.world is not None
        ended = asyncio.ensure_future(self.bot.wait_ended())
        try:
            ready = await self.fake.wait_ready_or_stopped(self.world.bot_user_id, ended)
        except TimeoutError:
            raise PlaygroundError(
                f"the bot did not connect to the playground within {READY_TIMEOUT:.0f} s"
            ) from None
        finally:
            ended.cancel()
            await asyncio.gather(ended, return_exceptions=True)
        if ready is None:
            code = self.bot.exit_code
            raise PlaygroundError(
                "the bot stopped before it was ready in the playground"
                + (f" (exit status {code}; its own message is above)" if code else "")
            )

    def _save_failed(self, exc: OSError) -> None:
        _log.warning("playground.save_failed", path=str(self.state_path), error=str(exc))

    async def stop(self) -> None:
        """Stop in reverse order; safe after a failed start and safe to call twice."""
        if self._progress is not None:
            await self._progress.stop()
            self._progress = None
        if self.bot is not None:  # first, while the page still shows it stopping
            if self.bot.state == "running":
                await self.bot.stop()
            await self.bot.wait_ended()
        if self.web is not None:
            await self.web.stop()
            self.web = None
        await self._stack.aclose()

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
    """Run the playground until SIGINT or SIGTERM; returns the exit status.

    The bot runs in its own process; stopping it from the page leaves this one (and
    the page) running until Ctrl-C.
    """
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
    playground = Playground(config, progress=sys.stderr, bot_process=True)
    try:
        if reason:
            _say(f"threadbound: {reason}")
        starting = asyncio.create_task(playground.start())
        asked = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, asked}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # Ctrl-C while the bot was still connecting
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return 0
        asked.cancel()
        try:
            url = starting.result()
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
            f"{ADMIN_NAME}; answers come from {model}. The page's Stop / Kill / Start "
            "buttons control the bot; Ctrl-C stops everything."
        )
        log_path = config.json_log_path()
        if log_path is not None and not console:
            _say(f"  logs: {log_path}")
        await stop.wait()
        return 0
    finally:
        await playground.stop()
        _log.info("playground.stopped")
        shutdown_logging()
