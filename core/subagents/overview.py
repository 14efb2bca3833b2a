"""The subagents of one chat account at a glance: the read model behind ``/agents list``.

One row per subagent, newest first: who runs it now (an accepted handoff's
agent, else the one spawned), its state, where it speaks, its queues and what
it has cost. Completed and failed subagents come from the ``subagents`` table
(they may have left memory long ago); one in memory adds its live state. Who
took over a session not in memory is read from the handoffs table for all the
rows at once, never one query per subagent. Sessions in memory with neither a
subagent record nor a conversation (legacy runs) follow, as long as the rows
did not reach the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.agent.assignment import active_agent
from core.agent.usage import context_size
from core.bindings.records import ConversationRef
from core.bindings.service import SessionBindingService
from core.handoffs import repository as handoffs_repository
from core.handoffs.activation import HandoffRecord
from core.runtime import SessionRuntime
from core.store.database import Database
from core.subagents.records import SubagentRecord
from core.subagents.service import SubagentService

__all__ = ["Overview", "SubagentOverview", "SubagentRow", "UnboundRun", "overview_lines"]


@dataclass(frozen=True, slots=True)
class SubagentRow:
    """One subagent as the overview shows it.

    ``name``: the persona running it now; ``handed_from``: the spawned agent's, when
    a handoff brought another. ``queued`` (steering, follow-up) and
    ``context_share`` are known only for a subagent in memory; ``estimated``: the
    bot counted tokens the model server did not report.
    """

    session_key: str
    name: str
    handed_from: str | None
    state: str
    conversation_id: str | None
    queued: tuple[int, int] | None
    tokens: int
    cost_usd: float
    estimated: bool
    context_share: float | None
    conversation: ConversationRef | None = None
    """Where it speaks (``conversation_id`` is its id), for a channel's link to it."""


@dataclass(frozen=True, slots=True)
class UnboundRun:
    """A session in memory that is no subagent and speaks nowhere (a legacy run)."""

    session_key: str
    running: bool


@dataclass(frozen=True, slots=True)
class Overview:
    """The rows, newest first; ``cut``: the limit was reached (more may exist, and the
    legacy runs are not listed)."""

    subagents: tuple[SubagentRow, ...]
    cut: bool
    unbound: tuple[UnboundRun, ...]


class SubagentOverview:
    """``/agents list``'s read model, for one account at a time."""

    def __init__(
        self,
        subagents: SubagentService,
        runtime: SessionRuntime,
        bindings: SessionBindingService,
        database: Database,
    ) -> None:
        self._subagents = subagents
        self._runtime = runtime
        self._bindings = bindings
        self._db = database

    async def overview(
        self, account_id: str, /, *, limit: int = 25, channel: str = "discord"
    ) -> Overview:
        """The subagents requested on ``channel``'s ``account_id`` (or by a model: no
        requester), newest first, at most ``limit`` of them."""
        records = await self._subagents.list()
        shown = [
            record
            for record in reversed(records)
            if record.requester is None
            or (record.requester.account_id, record.requester.channel) == (account_id, channel)
        ][:limit]
        taken = await self._taken_over(
            [r.session_key for r in shown if self._runtime.peek(r.session_key) is None]
        )
        rows = tuple(self._row(record, taken) for record in shown)
        if len(rows) >= limit:
            return Overview(rows, True, ())
        known = {record.session_key for record in records}
        return Overview(rows, False, tuple(self._unbound(known)))

    async def _taken_over(self, session_keys: list[str]) -> dict[str, str]:
        """The agent an accepted (or completed) handoff gave each of ``session_keys``: the
        latest one's, from the handoffs table in one query."""
        if not session_keys:
            return {}
        handoffs = await self._db.run(handoffs_repository.list_taken_over, session_keys)
        latest: dict[str, HandoffRecord] = {}
        for h in handoffs:
            if h.session_key not in latest or h.updated_at > latest[h.session_key].updated_at:
                latest[h.session_key] = h
        return {key: h.to_agent for key, h in latest.items()}

    def _row(self, record: SubagentRecord, taken: dict[str, str]) -> SubagentRow:
        key = record.session_key
        agent = self._runtime.peek(key)
        binding = self._subagents.binding_of(key)
        if agent is not None:
            running = active_agent(agent.tree) or record.agent
        else:
            running = taken.get(key, record.agent)
        handed_from = self._subagents.name_of(record) if running != record.agent else None
        if agent is None:
            return SubagentRow(
                session_key=key,
                name=self._subagents.display_name(running),
                handed_from=handed_from,
                state=record.state,
                conversation_id=binding.conversation.conversation_id if binding else None,
                conversation=binding.conversation if binding else None,
                queued=None,
                tokens=record.tokens,
                cost_usd=record.cost_usd,
                estimated=False,
                context_share=None,
            )
        snapshot = agent.snapshot()
        usage = agent.tree.total_usage
        window = agent.model_info.context_window
        return SubagentRow(
            session_key=key,
            name=self._subagents.display_name(running),
            handed_from=handed_from,
            state="running" if agent.running else record.state,
            conversation_id=binding.conversation.conversation_id if binding else None,
            conversation=binding.conversation if binding else None,
            queued=(len(snapshot.steering_queue), len(snapshot.follow_up_queue)),
            tokens=usage.prompt_tokens + usage.completion_tokens,
            cost_usd=usage.cost_usd or 0.0,
            estimated=usage.estimated,
            context_share=context_size(agent.tree).tokens / window if window else None,
        )

    def _unbound(self, known: set[str]) -> list[UnboundRun]:
        runs = []
        for key in self._runtime.resident():
            agent = self._runtime.peek(key)
            if key in known or agent is None or self._bindings.list_by_session(key):
                continue
            runs.append(UnboundRun(key, agent.running))
        return runs


def overview_lines(overview: Overview, *, place: Callable[[ConversationRef], str]) -> list[str]:
    """``agents list``'s answer, on every platform alike: one line per subagent, newest
    first (state, where, queues, usage); then the sessions in memory that speak nowhere
    (legacy runs). ``place`` is how the platform links to a conversation."""
    lines = []
    for row in overview.subagents:
        name = f"**{row.name}**"
        if row.handed_from is not None:
            name += f" (handed over from {row.handed_from})"
        where = place(row.conversation) if row.conversation is not None else "no thread"
        parts = [f"{name} `{row.session_key}` {row.state}", where]
        if row.queued is not None:
            parts.append(f"{row.queued[0]} steer / {row.queued[1]} queued")
        approx = "≈" if row.estimated else ""  # the bot counted what the server did not
        cost = f", ${row.cost_usd:.4f}" if row.cost_usd else ""
        context = f", context {row.context_share:.0%}" if row.context_share is not None else ""
        parts.append(f"{approx}{row.tokens} tokens{cost}{context}")
        lines.append(" · ".join(parts))
    if overview.cut:
        lines.append("… and more (newest first)")
    lines.extend(
        f"unbound run `{run.session_key}` ({'running' if run.running else 'idle'})"
        for run in overview.unbound
    )
    return lines
