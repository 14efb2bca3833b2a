"""SessionRuntime: one agent (actor) per live session, supervised.

An agent is started on first use and rebuilt from the session log, which is
the only source of truth: conversation, head, bookmarks and queued follow-ups
all come back after a restart. A turn that was running when the process died
is marked ``turn_interrupted`` (its unanswered tool calls get synthetic
results) and is never silently re-run; queued follow-ups then resume, since
they are requests the user already made. The exception is a turn that was
waiting for a person to approve a tool call: nothing of it ran past the
request, so it goes on waiting (:meth:`SessionRuntime.resume_waiting`).
Idle agents are evicted to bound memory; an agent whose task crashes is
rebuilt from the log, a few times at most before the runtime gives up on that
session and says so in the logs.

With several bot processes over one store, an agent in memory is work this
process has taken: given :class:`core.leases.Leases`, starting one takes the
session's lease (refused while another live process holds it) and eviction
gives it back, so two processes never run one session's actor at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.agent.agent import Agent, resolved, withdrawal
from core.agent.endings import STOPPING
from core.agent.events import AgentEvent, TurnCancelled, TurnEnded, TurnInterrupted
from core.agent.loop import resumable_turn
from core.agent.messages import INTERRUPTED_RESULT, unanswered_results
from core.clock import Clock, SystemClock
from core.errors import SessionError
from core.leases import Leases
from core.logging import get_logger
from core.sessions.log import SessionLog, as_item
from core.sessions.payloads import TurnInterruptedPayload
from core.sessions.tree import PendingApproval, SessionTree
from core.stream import Publish, ignore

__all__ = ["AgentFactory", "AgentStarted", "SessionBusy", "SessionRuntime"]

_log = get_logger("core.runtime")

AgentFactory = Callable[[SessionTree, SessionLog, Callable[[Agent, BaseException], None]], Agent]
"""Builds the agent of a session (provider, tools, settings by its profile), given
its rehydrated tree, the log, and the crash callback to pass to ``Agent``."""


class SessionBusy(SessionError):
    """Another live bot process runs this session's agent (it holds the lease)."""

    def __init__(self, session_key: str, holder: str) -> None:
        self.holder = holder
        super().__init__(
            f"session {session_key!r} is running in another bot process ({holder}); "
            "it moves to this one only if that process stops",
            session_key=session_key,
        )


@dataclass(frozen=True, slots=True)
class AgentStarted:
    """An agent was built for a session (first use, or rebuilt after an eviction, a
    crash or a restart), before it resumes work: whatever shows the session attaches
    now, or an agent resuming its queued follow-ups would answer into nowhere."""

    agent: Agent


@dataclass(slots=True)
class _Entry:
    agent: Agent
    last_used: datetime


class SessionRuntime:
    """Registry of live agents keyed by session key."""

    def __init__(
        self,
        log: SessionLog,
        factory: AgentFactory,
        *,
        clock: Clock | None = None,
        idle_evict_seconds: float = 900.0,
        max_restarts: int = 3,
        restart_window_seconds: float = 300.0,
        leases: Leases | None = None,
        publish: Publish[AgentStarted] = ignore,
    ) -> None:
        self._log = log
        self._leases = leases
        self._factory = factory
        self.clock: Clock = clock or SystemClock()
        self._idle_evict = timedelta(seconds=idle_evict_seconds)
        self._max_restarts = max_restarts
        self._restart_window = timedelta(seconds=restart_window_seconds)
        self._entries: dict[str, _Entry] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._crashes: dict[str, list[datetime]] = {}
        self._restarts: set[asyncio.Task[None]] = set()
        self._publish = publish

    @property
    def leases(self) -> Leases | None:
        """The leases starting an agent takes (None: one process, nothing to take)."""
        return self._leases

    def resident(self) -> list[str]:
        """Session keys with an agent in memory."""
        return list(self._entries)

    def peek(self, session_key: str, /) -> Agent | None:
        """The resident agent, without starting one."""
        entry = self._entries.get(session_key)
        return entry.agent if entry else None

    async def get(self, session_key: str, /) -> Agent:
        """The session's agent, started and rehydrated on first use."""
        return await self._get(session_key, None, leased=False)

    async def start_new(self, tree: SessionTree, /, *, leased: bool = False) -> Agent:
        """The agent of a session this process has just created, started from ``tree``.

        A spawn mints a new key and writes its first events through ``tree``, which
        then holds everything the store does: loading it back would be three SELECTs
        for what is in memory already, on the path of every spawn. ``leased``: the
        caller took the session's lease (see :attr:`leases`) in the transaction that
        made the session visible to other processes, so it is not taken again. An
        agent already resident (someone wrote in the new thread first) is returned.
        """
        return await self._get(tree.session_key, tree, leased=leased)

    async def _get(self, session_key: str, new: SessionTree | None, *, leased: bool) -> Agent:
        entry = self._entries.get(session_key)
        if entry is not None:
            entry.last_used = self.clock.now()
            return entry.agent
        lock = self._starting.setdefault(session_key, asyncio.Lock())
        try:
            async with lock:
                entry = self._entries.get(session_key)
                if entry is None:
                    if not leased:
                        await self._take_lease(session_key)
                    agent, interrupted, withdrawn = await self._start(session_key, new)
                    entry = _Entry(agent, self.clock.now())
                    self._entries[session_key] = entry
                    self._publish(AgentStarted(agent))
                    if interrupted is not None:  # shown where the agent is, before it goes on
                        agent.emit(TurnInterrupted(session_key, interrupted, stopping=False))
                    for pending in withdrawn:  # its buttons say so instead of going dead
                        agent.emit(resolved(session_key, pending, "withdrawn", reason="restart"))
                    await agent.resume()
                return entry.agent
        finally:
            if not lock.locked() and self._starting.get(session_key) is lock:
                del self._starting[session_key]  # one lock per key would grow forever

    async def _take_lease(self, session_key: str) -> None:
        if self._leases is None:
            return
        holder = await self._leases.take("session", session_key)
        if holder is not None:
            raise SessionBusy(session_key, holder)

    async def reload(self, session_key: str, /) -> Agent:
        """Drop the resident agent and start a fresh one from the log; returns it.

        For when the log changed what the agent is built from (an accepted
        handoff appends ``agent.activated``): the next agent must come from the
        new profile. A running turn is never cut off for that.

        Raises:
            SessionError: a turn is running; wait for it to end or cancel it first.
        """
        entry = self._entries.get(session_key)
        if entry is not None:
            if entry.agent.running:
                raise SessionError(
                    f"session {session_key!r} is running a turn, so its agent cannot be "
                    "replaced now; wait for the turn to end or cancel it, then try again",
                    session_key=session_key,
                )
            del self._entries[session_key]
            _log.info("session.reloaded", session_key=session_key)
        return await self.get(session_key)

    async def _start(
        self, session_key: str, new: SessionTree | None = None
    ) -> tuple[Agent, str | None, tuple[PendingApproval, ...]]:
        """The agent, the id of a turn a dead process left cut off (now closed), and the
        approval requests that turn left open (now withdrawn). ``new``: the tree of a
        session just created here, used as it is instead of loaded."""
        tree = new if new is not None else await self._log.load(session_key)
        interrupted, withdrawn = await self._close_interrupted_turn(tree)
        agent = self._factory(tree, self._log, self._crashed)
        agent.subscribe(self._on_event)
        return agent, interrupted, withdrawn

    def _on_event(self, event: AgentEvent) -> None:
        # Idleness counts from the end of the last turn, not from the last get().
        if isinstance(event, TurnEnded | TurnCancelled):
            self.touch(event.session_key)

    async def resume_waiting(self, include: Callable[[str], Awaitable[bool]] | None = None) -> int:
        """Start the agents whose turn waits for an approval (at start-up), so their
        timeouts run again; returns how many. ``include`` picks this process's
        sessions; one another live process runs stays with it."""
        resumed = 0
        for key in await self._log.awaiting_approval():
            if include is not None and not await include(key):
                continue
            try:
                await self.get(key)
            except SessionBusy:
                continue
            resumed += 1
        return resumed

    async def _close_interrupted_turn(
        self, tree: SessionTree
    ) -> tuple[str | None, tuple[PendingApproval, ...]]:
        """Close the turn a dead process left running, unless it waits for an approval it
        can take up: its id, and the requests withdrawn with it."""
        turn_id = tree.running_turn_id
        if turn_id is None or resumable_turn(tree) is not None:
            return None, ()
        # A request only its dead process could answer (an external agent's) ends too.
        withdrawn = tree.pending_approvals
        items = [as_item(withdrawal(p, "restart")) for p in withdrawn]
        items += [
            as_item(payload) for payload in unanswered_results(tree, INTERRUPTED_RESULT, turn_id)
        ]
        items.append(as_item(TurnInterruptedPayload(turn_id=turn_id)))
        await self._log.append_many(tree, items)
        _log.warning("session.turn_interrupted", session_key=tree.session_key, turn_id=turn_id)
        return turn_id, withdrawn

    # -- supervision -----------------------------------------------------------

    def _crashed(self, agent: Agent, exc: BaseException) -> None:
        key = agent.session_key
        entry = self._entries.get(key)
        if entry is not None and entry.agent is agent:
            del self._entries[key]
        now = self.clock.now()
        recent = [t for t in self._crashes.get(key, []) if now - t < self._restart_window]
        recent.append(now)
        self._crashes[key] = recent
        if len(recent) > self._max_restarts:
            _log.error(
                "session.restart_abandoned",
                session_key=key,
                crashes=len(recent),
                error=f"{type(exc).__name__}: {exc}",
            )
            return
        task = asyncio.get_running_loop().create_task(self._restart(key))
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    async def _restart(self, session_key: str) -> None:
        _log.warning("session.restarting", session_key=session_key)
        try:
            await self.get(session_key)
        except Exception:
            _log.error("session.restart_failed", session_key=session_key, exc_info=True)

    async def wait_restarts(self) -> None:
        """Wait for restarts in progress (tests and shutdown use it)."""
        while self._restarts:
            await asyncio.gather(*self._restarts, return_exceptions=True)

    # -- eviction and shutdown -------------------------------------------------

    def evict_idle(self) -> list[str]:
        """Drop agents idle for longer than the eviction period; their state is in the log."""
        now = self.clock.now()
        evicted = [
            key
            for key, entry in self._entries.items()
            if not entry.agent.running and now - entry.last_used >= self._idle_evict
        ]
        for key in evicted:
            del self._entries[key]
        return evicted

    def touch(self, session_key: str, /) -> None:
        entry = self._entries.get(session_key)
        if entry is not None:
            entry.last_used = self.clock.now()

    async def run_maintenance(self, *, interval_seconds: float = 60.0) -> None:
        """Evict idle agents forever, on the runtime's clock, giving their leases back."""
        while True:
            await self.clock.sleep(interval_seconds)
            for key in self.evict_idle():
                _log.info("session.evicted", session_key=key)
                await self._give_back(key)

    async def _give_back(self, session_key: str) -> None:
        """Release an evicted session's lease, unless it was started again meanwhile."""
        if self._leases is None or session_key in self._entries:
            return
        await self._leases.release("session", session_key)
        if session_key in self._entries or session_key in self._starting:
            await self._leases.take("session", session_key)  # restarted during the release

    async def interrupt(self) -> int:
        """At a clean stop: stop running turns, keeping their queues, so a restart resumes
        them cleanly; a turn waiting for an approval is left waiting, for the next
        process. Whoever shows a stopped turn is told (``TurnInterrupted``) while it can
        still say so. Returns how many turns were stopped."""
        await self.wait_restarts()
        stopped = 0
        for resident in list(self._entries.values()):
            agent = resident.agent
            if not agent.running or await agent.suspend():
                continue
            turn_id = agent.tree.running_turn_id
            await agent.cancel(keep_queues=True, reason=STOPPING)  # the bot's, no person's
            agent.emit(TurnInterrupted(agent.session_key, turn_id, stopping=True))
            stopped += 1
        return stopped

    async def close(self) -> None:
        """:meth:`interrupt`, then forget every agent (their state is in the log)."""
        await self.interrupt()
        self._entries.clear()
