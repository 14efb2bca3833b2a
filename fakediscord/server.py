"""``FakeDiscord``: a Discord served on loopback for the real discord.py client.

Tests (and later the local playground) set it up, act as users, inspect what the bots
did and inject failures. Pointing discord.py at it takes two assignments::

    discord.http.Route.BASE = f"{fake.base_url}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)

Every wait here is event-driven (see :mod:`fakediscord._signal`) and bounded by a
timeout, so a missing event fails fast instead of hanging and nothing ever sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from fakediscord._acting import UserActions, object_id
from fakediscord.commands import CommandRegistry
from fakediscord.faults import Fault, Faults, Gate, PathPattern
from fakediscord.gateway import Gateway, GatewaySession, SentEvent
from fakediscord.interactions import Interactions
from fakediscord.models import Channel, Guild, Message, User, Webhook
from fakediscord.operations import Operations
from fakediscord.persistence import Journal
from fakediscord.ratelimits import RateLimiter, RateLimits
from fakediscord.recording import RecordedRequest, Recorder
from fakediscord.rest import Api, build_app
from fakediscord.state import Clock, State

__all__ = ["DEFAULT_RATE_LIMITS", "WAIT", "FakeDiscord"]

WAIT = 5.0
"""Default bound, in seconds, on waits that normally take milliseconds."""

DEFAULT_RATE_LIMITS = RateLimits.discord()
"""How a :class:`FakeDiscord` limits when not told: as Discord does, so every test and the
playground meet the limits the bot meets in production; a test or benchmark that needs
an unlimited fake says ``rate_limits=RateLimits.off()``."""


class FakeDiscord(UserActions):
    """A fake Discord (REST ``/api/v10`` + gateway websocket) on ``127.0.0.1``.

    Args:
        port: 0 picks a free port; read the real one from :attr:`base_url`.
        heartbeat_interval_ms: sent in HELLO. Long by default so discord.py's own
            heartbeats never interleave with a test's :meth:`sync`.
        shards: the shard count ``GET /gateway/bot`` recommends.
        clock: anything with ``now()``; message timestamps and snowflakes follow it.
        wait_timeout: seconds any ``wait_*`` helper (and a gate's or an interaction
            handle's) may take before raising ``TimeoutError``.
        keep_requests: remember only the newest N REST requests (the playground runs
            for hours); None, the default for tests, keeps every one.
        rate_limits: Discord's rate limits (``RateLimits.discord()``) or none
            (``RateLimits.off()``); None: :data:`DEFAULT_RATE_LIMITS`. The limiter, with
            its counts of 429s and invalid requests, is :attr:`rate_limits`.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        heartbeat_interval_ms: int = 41_250,
        shards: int = 1,
        clock: Clock | None = None,
        wait_timeout: float = WAIT,
        keep_requests: int | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self._host, self._port = host, port
        self.wait_timeout = wait_timeout
        self.state = State(clock)
        self.gateway = Gateway(
            self.state, lambda: self.gateway_url, heartbeat_ms=heartbeat_interval_ms
        )
        self.ops = Operations(self.state, self.gateway)
        self.commands = CommandRegistry(self.state)
        self.interactions = Interactions(self.state, self.gateway, self.ops)
        self.recorder = Recorder(self.state.changed, limit=keep_requests)
        self.faults = Faults()
        self.rate_limits = RateLimiter(DEFAULT_RATE_LIMITS if rate_limits is None else rate_limits)
        """Decides 429s and counts them (``counts_by_scope``, ``total_429``,
        ``invalid_requests()``); ``rate_limits.configure(...)`` changes the limits live."""
        self._api = Api(
            state=self.state,
            ops=self.ops,
            gateway=self.gateway,
            commands=self.commands,
            interactions=self.interactions,
            recorder=self.recorder,
            faults=self.faults,
            limiter=self.rate_limits,
            shards=shards,
        )
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.gateway_url = ""
        self.journal: Journal | None = None
        """Where the state is saved change by change, once :meth:`persist` was called."""
        self.on_save_failed: Callable[[OSError], None] | None = None
        """Told when saving before a REST answer failed (the answer still goes out: the
        change is in memory and stays pending for the next save)."""

    # lifecycle

    async def start(self) -> None:
        self._runner = web.AppRunner(build_app(self._api), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"
        self.state.base_url = self.base_url
        self.gateway_url = f"ws://{host}:{port}/gateway"
        self._api.gateway_url = self.gateway_url

    async def stop(self) -> None:
        """Close every gateway connection, then the server, then the journal; safe to call
        twice."""
        if self._runner is not None:
            await self.gateway.close_all()
            await self._runner.cleanup()
            self._runner = None
        if self.journal is not None:
            self.journal.close(self.state)

    # persistence

    def persist(self, path: Path) -> bool:
        """Keep the state in ``path`` from now on, saved before every REST answer.

        What the file (and its journal) hold is loaded first; returns whether there was
        anything. Changes made outside a REST request (the test driver, a page acting
        as a user) are saved by :meth:`commit`, which their caller calls before it
        answers in turn. Raises ``ValueError`` naming the file when it is not a state.
        """
        journal = Journal(path)
        found = journal.open(self.state)
        self.journal = journal
        self._api.before_answer = self._commit_before_answer
        return found

    def commit(self) -> int:
        """Save what changed since the last save (see :class:`Journal`); returns the bytes
        written. Without :meth:`persist` there is nothing to do. A failed write raises
        ``OSError``; the change stays pending for the next commit."""
        if self.journal is None:
            return 0
        return self.journal.commit(self.state)

    def _commit_before_answer(self) -> None:
        try:
            self.commit()
        except OSError as exc:
            if self.on_save_failed is None:
                raise
            self.on_save_failed(exc)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # setup: synchronous, usable before or after bots connect (connected bots are told)

    def add_bot(self, token: str, name: str = "threadbound") -> User:
        """A bot account for ``token`` (its own application, id = user id), in every guild."""
        account = self.state.add_bot(token, name)
        for guild in self.state.guilds.values():
            self.ops.announce_member(guild, account.user_id)
        return self.state.users[account.user_id]

    def add_guild(
        self, name: str, *, owner: User | None = None, shard: tuple[int, int] | None = None
    ) -> Guild:
        """A guild; ``shard=(id, count)`` puts it on that gateway shard."""
        guild = self.state.add_guild(name, owner, shard=shard)
        self.ops.announce_guild(guild)
        return guild

    def add_text_channel(self, guild: Guild | int, name: str) -> Channel:
        return self.ops.create_channel(self.state.guild(object_id(guild)), name)

    def add_member(self, guild: Guild | int, name: str, *, admin: bool = False) -> User:
        """A new user who is a member of ``guild``; ``admin`` gives an Administrator role."""
        user = self.state.add_user(name)
        self.join(guild, user, admin=admin)
        return user

    def set_bot_permissions(self, guild: Guild | int, bot: User | int, permissions: int) -> None:
        """What the bot's managed role in ``guild`` allows from now on (connected bots are
        told): grant it Pin Messages, or take Manage Webhooks away."""
        found = self.state.guild(object_id(guild))
        user_id = object_id(bot)
        role = next(r for r in found.roles.values() if r.managed and r.bot_id == user_id)
        self.ops.set_role_permissions(role, permissions)

    def add_user(self, name: str) -> User:
        """A user in no guild yet (see :meth:`join`)."""
        return self.state.add_user(name)

    def join(self, guild: Guild | int, user: User | int, *, admin: bool = False) -> None:
        """Make an existing user a member of another guild."""
        found = self.state.user(object_id(user))
        self.ops.add_member(self.state.guild(object_id(guild)), found, admin=admin)

    def add_thread(
        self, parent: Channel | int, name: str, *, owner: User | int | None = None
    ) -> Channel:
        """A public thread started by ``owner`` (the guild owner if None)."""
        channel = self.state.channel(object_id(parent))
        owner_id = (
            object_id(owner) if owner is not None else self.state.guild(channel.guild_id).owner_id
        )
        return self.ops.create_thread(channel, name, owner_id)

    # inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.recorder.requests

    def requests_matching(
        self, method: str | None = None, path_prefix: str | None = None
    ) -> list[RecordedRequest]:
        return self.recorder.matching(method, path_prefix)

    @property
    def unimplemented(self) -> list[RecordedRequest]:
        """Requests for routes the fake lacks (answered 404): missing coverage, not bugs."""
        return [r for r in self.requests if not r.implemented]

    def events(
        self,
        user_id: User | int | None = None,
        name: str | None = None,
        *,
        shard_id: int | None = None,
    ) -> list[SentEvent]:
        """Gateway dispatches sent so far, optionally to one bot, of one type, to one shard.

        ``shard_id`` keeps those sent to sessions of that shard (an unsharded session is
        shard 0).
        """
        return [
            e
            for e in self.gateway.sent
            if (user_id is None or e.user_id == object_id(user_id))
            and (name is None or e.name == name)
            and (shard_id is None or e.shard_id == shard_id)
        ]

    def presence(self, user: User | int) -> str:
        """``online`` while the user (a bot) has an identified gateway connection, else
        ``offline``: what the member list shows."""
        return self.gateway.presence(object_id(user))

    def channel(self, channel_id: int) -> Channel:
        return self.state.channel(channel_id)

    def message(self, message_id: int) -> Message:
        return self._message(message_id)

    def messages_in(self, channel_id: Channel | int) -> list[Message]:
        """Visible messages (not ephemeral), oldest first; includes system messages."""
        return self.state.messages_in(object_id(channel_id))

    def webhooks_in(self, channel_id: Channel | int) -> list[Webhook]:
        return [w for w in self.state.webhooks.values() if w.channel_id == object_id(channel_id)]

    # waiting

    async def wait_for_request(
        self,
        method: str | None,
        path_prefix: str | None = None,
        predicate: Callable[[RecordedRequest], bool] | None = None,
        *,
        since: int = 0,
    ) -> RecordedRequest:
        """The first answered request (from index ``since``) matching method and path."""
        async with asyncio.timeout(self.wait_timeout):
            return await self.recorder.wait_for(method, path_prefix, predicate, since=since)

    async def wait_for_message(
        self,
        channel_id: Channel | int,
        predicate: Callable[[Message], bool] | None = None,
        *,
        after: Message | int | None = None,
    ) -> Message:
        """The first message in the channel (newer than ``after``) matching ``predicate``."""
        floor = object_id(after) if after is not None else 0

        def probe() -> Message | None:
            for message in self.state.messages_in(object_id(channel_id)):
                if message.id > floor and (predicate is None or predicate(message)):
                    return message
            return None

        async with asyncio.timeout(self.wait_timeout):
            return await self.state.changed.wait_for(probe)

    async def wait_ready(self, bot_user_id: User | int) -> GatewaySession:
        """Wait until the bot identified and its client parsed READY and its GUILD_CREATEs.

        For a sharded bot that is its first ready shard; see :meth:`wait_shards_ready`.
        """
        async with asyncio.timeout(self.wait_timeout):
            return await self.state.changed.wait_for(
                lambda: self.gateway.is_ready(object_id(bot_user_id))
            )

    async def wait_shards_ready(
        self, bot_user_id: User | int, shard_ids: Iterable[int], *, since: int = 0
    ) -> set[int]:
        """Wait until each of ``shard_ids`` has a ready connection of the bot; return all ready.

        For sharded bots (one process with several shards, or several processes):
        :meth:`wait_ready` returns at the first ready shard. ``since``: see
        :meth:`Gateway.ready_shards <fakediscord.gateway.Gateway.ready_shards>`.
        """
        wanted = set(shard_ids)
        user_id = object_id(bot_user_id)

        def probe() -> set[int] | None:
            ready = self.gateway.ready_shards(user_id, since=since)
            return ready if wanted <= ready else None

        async with asyncio.timeout(self.wait_timeout):
            return await self.state.changed.wait_for(probe)

    async def wait_ready_or_stopped(
        self, bot_user_id: User | int, client_run: asyncio.Task[Any]
    ) -> GatewaySession | None:
        """:meth:`wait_ready`, but stop waiting if ``client_run`` ends first.

        ``client_run`` is the task running the bot's client; when it ends before READY its
        exception is re-raised (a login failure, ...), else None is returned.
        """
        ready = asyncio.create_task(self.wait_ready(bot_user_id))
        done, _ = await asyncio.wait({client_run, ready}, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            await asyncio.gather(ready, return_exceptions=True)
            client_run.result()
            return None
        return ready.result()

    async def sync(self, bot_user_id: User | int) -> None:
        """Wait until the bot's client has parsed every event dispatched to it so far."""
        async with asyncio.timeout(self.wait_timeout):
            await self.gateway.sync(object_id(bot_user_id))

    # faults

    def fail_next(
        self,
        method: str,
        path_pattern: PathPattern,
        status: int,
        *,
        code: int | None = None,
        times: int = 1,
        retry_after: float | None = None,
        global_: bool = False,
        via_header: bool = True,
        message: str | None = None,
    ) -> Fault:
        """Answer the next ``times`` matching requests with an error instead of the route.

        ``path_pattern`` is a glob over the API path (``/channels/*/messages``) or a
        compiled regex. For 429, ``retry_after`` is what discord.py sleeps before
        retrying (keep it tiny); ``via_header=False`` imitates a Cloudflare ban.
        """
        fault = Fault(
            method=method.upper(),
            pattern=path_pattern,
            status=status,
            code=code,
            remaining=times,
            retry_after=retry_after,
            global_=global_,
            via_header=via_header,
            message=message,
        )
        self.faults.faults.append(fault)
        return fault

    def hold(self, method: str, path_pattern: PathPattern) -> Gate:
        """Hold matching requests until ``gate.release()``: a slow route without sleeping."""
        gate = Gate(method.upper(), path_pattern, wait_timeout=self.wait_timeout)
        self.faults.gates.append(gate)
        return gate
