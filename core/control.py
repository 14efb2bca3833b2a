"""What a person does to a session from a command: read it, switch its model, compact,
cancel, rewind, bookmark.

Each use case takes the session's key (and who asks, where it is recorded) and
returns one result; the live agent stays behind it, so a channel parses, calls
one method and renders. Who may change the session is the caller's guard
(:class:`core.subagents.owners.Owners`), asked first. A refusal the person can
act on is a result (:class:`Running`, :class:`External`, :class:`UnknownProvider`,
:class:`CompactFailed`); a reference that names no node is a
:class:`~core.errors.SessionError` whose message says what to type.

A node is named as the tree shows it: its full id, a bookmark label, or a
unique prefix of a conversation node's id (:func:`resolve_ref`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.agent.agent import Agent, AgentBusy
from core.agent.compaction import Compacted, NotCompacted
from core.agent.factory import ProfileAgentFactory
from core.artifacts.service import ArtifactService
from core.errors import ProviderError, SessionError
from core.logging import get_logger
from core.providers.demo import DemoProvider
from core.runtime import SessionRuntime
from core.sessions.events import SessionEvent
from core.sessions.log import SessionLog
from core.sessions.snapshot import QueuedMessage
from core.sessions.tree import SessionTree

__all__ = [
    "Cancelled",
    "CompactFailed",
    "External",
    "ModelSwitched",
    "NothingRunning",
    "Rewound",
    "Running",
    "SessionControl",
    "SessionView",
    "UnknownProvider",
    "cancelled_text",
    "resolve_ref",
]

_log = get_logger("core.control")


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as a command shows it, read once: its tree, what runs it and whether a
    turn runs now. ``external``: the external (ACP) agent it is, which keeps its own
    model and context; ``demo``: it answers with the built-in demo model."""

    session_key: str
    tree: SessionTree
    running: bool
    model: str | None
    provider: str
    demo: bool
    context_window: int
    external: str | None


@dataclass(frozen=True, slots=True)
class Running:
    """Refused: a turn is running (wait for it, or cancel it, first)."""


@dataclass(frozen=True, slots=True)
class External:
    """Refused: the session is the external agent ``agent``, which does this itself."""

    agent: str


@dataclass(frozen=True, slots=True)
class UnknownProvider:
    """Refused: no provider ``name`` is configured; ``known`` are the configured ones."""

    name: str
    known: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModelSwitched:
    """From its next model call on, the session uses ``model`` on ``provider``."""

    provider: str
    model: str


@dataclass(frozen=True, slots=True)
class CompactFailed:
    """Nothing was compacted: ``reason`` says why (a turn started, the model failed)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The running turn stopped; ``dropped`` are the queued messages let go with it."""

    dropped: tuple[QueuedMessage, ...]


@dataclass(frozen=True, slots=True)
class NothingRunning:
    """No agent of the session is in memory: nothing to cancel."""


def cancelled_text(done: Cancelled | NothingRunning) -> str:
    """A cancel command's answer, on every platform alike: stopped (and the queued messages
    let go with it, listed so nothing is lost unseen), or nothing was running."""
    if not isinstance(done, Cancelled):
        return "Nothing is running here."
    if done.dropped:
        listed = "\n".join(f"- ({m.mode}) {m.text}" for m in done.dropped)
        return f"Cancelled. Dropped {len(done.dropped)} queued message(s):\n{listed}"
    return "Cancelled."


@dataclass(frozen=True, slots=True)
class Rewound:
    """The conversation goes on from ``node_id``; ``old_text``: the user message the
    rewind went back before, to edit and send again (None: it went back to a node)."""

    node_id: str
    old_text: str | None


def resolve_ref(tree: SessionTree, ref: str, /) -> str:
    """The node id ``ref`` names: a full id, a bookmark label, or a unique id prefix.

    Only conversation nodes are matched by prefix; they are the ones a tree shows.

    Raises:
        SessionError: no node or bookmark matches, or the prefix matches several nodes.
    """
    ref = ref.strip()
    if ref in tree.bookmarks or any(e.node_id == ref for e in tree.events):
        return tree.resolve(ref)
    matches = [e.node_id for e in tree.events if e.advances and e.node_id.startswith(ref)]
    if len(matches) == 1 and ref:
        return matches[0]
    if len(matches) > 1 and ref:
        shown = ", ".join(m[: len(ref) + 4] for m in matches[:5])
        raise SessionError(
            f"{ref!r} is the start of {len(matches)} node ids ({shown}); "
            "type more characters of the id you mean",
            session_key=tree.session_key,
            ref=ref,
        )
    raise SessionError(
        f"this session has no node or bookmark {ref!r}; "
        "use /tree to see the node ids and bookmark labels",
        session_key=tree.session_key,
        ref=ref,
    )


def _view(agent: Agent) -> SessionView:
    return SessionView(
        session_key=agent.session_key,
        tree=agent.tree,
        running=agent.running,
        model=agent.model,
        provider=agent.provider.name,
        demo=isinstance(agent.provider, DemoProvider),
        context_window=agent.model_info.context_window,
        external=agent.settings.acp,
    )


class SessionControl:
    """The commands on one session, by its key; the agent is started where one is needed.

    Args:
        runtime: the live agents (started from the log when not in memory).
        sessions: the session log (a rewind, a bookmark, a tree read without an agent).
        factory: the configured providers' models (``/model``'s choices).
        artifacts: the artifacts a session's log holds.
    """

    def __init__(
        self,
        runtime: SessionRuntime,
        sessions: SessionLog,
        factory: ProfileAgentFactory,
        artifacts: ArtifactService,
    ) -> None:
        self._runtime = runtime
        self._sessions = sessions
        self._factory = factory
        self._artifacts = artifacts

    # -- reading ------------------------------------------------------------------------

    async def view(self, session_key: str, /) -> SessionView:
        """The session as its agent has it (the agent is started if it is not in memory)."""
        return _view(await self._runtime.get(session_key))

    async def tree(self, session_key: str, /) -> SessionTree:
        """The session as its agent holds it, or as the log has it: no agent is started
        just to read."""
        agent = self._runtime.peek(session_key)
        return agent.tree if agent is not None else await self._sessions.load(session_key)

    async def artifacts(self, session_key: str, /) -> Sequence[SessionEvent]:
        """The session's artifact events, in the order they were recorded."""
        return self._artifacts.list(await self.tree(session_key))

    def models(self) -> list[tuple[str, str]]:
        """``(provider, model)`` of every configured provider: what a session may switch to."""
        return self._factory.models()

    # -- changing -------------------------------------------------------------------------

    async def switch_model(
        self, session_key: str, /, provider: str, model: str | None, *, by: str
    ) -> ModelSwitched | UnknownProvider | External:
        """From the next model call on, ``model`` (None: the provider's configured one) on
        the configured ``provider``; recorded in the log as ``by``'s change."""
        agent = await self._runtime.get(session_key)
        if agent.settings.acp is not None:
            return External(agent.settings.acp)
        configured = dict(self._factory.models())
        if provider not in configured:
            return UnknownProvider(provider, tuple(configured))
        chosen = model or configured[provider]
        instance, info = self._factory.model_choice(provider, chosen)
        await agent.switch_model(provider, instance, chosen, info, by_user_id=by)
        return ModelSwitched(provider, chosen)

    async def compact(
        self, session_key: str, /, instructions: str | None = None
    ) -> Compacted | NotCompacted | CompactFailed | External:
        """Summarise the older conversation now, if that makes it smaller (a running turn
        refuses it: :class:`CompactFailed` says so)."""
        agent = await self._runtime.get(session_key)
        if agent.settings.acp is not None:
            return External(agent.settings.acp)
        try:
            return await agent.compact(instructions)
        except (AgentBusy, ProviderError) as exc:
            return CompactFailed(str(exc))

    async def cancel(
        self, session_key: str, /, *, by_user_id: str, by_name: str | None
    ) -> Cancelled | NothingRunning:
        """Stop the running turn and drop both queues, in ``by``'s name. A session whose
        agent is not in memory runs nothing: none is started to be cancelled; one idle
        with nothing queued has nothing to cancel either (and is not said to be)."""
        agent = self._runtime.peek(session_key)
        if agent is None or not (
            agent.running or agent.tree.steering_queue or agent.tree.follow_up_queue
        ):
            return NothingRunning()
        dropped = await agent.cancel(by_user_id=by_user_id, by_name=by_name)
        _log.info("turn.cancelled", session_key=session_key, user=by_user_id, dropped=len(dropped))
        return Cancelled(tuple(dropped))

    async def rewind(self, session_key: str, /, ref: str) -> Rewound | Running:
        """Continue the conversation from the node ``ref`` names (see :func:`resolve_ref`).

        Raises:
            SessionError: ``ref`` names no node, or the log refused the move.
        """
        agent = await self._runtime.get(session_key)
        if agent.running:
            return Running()
        node_id = resolve_ref(agent.tree, ref)
        old_text = await self._sessions.continue_from(agent.tree, node_id)
        return Rewound(node_id, old_text)

    async def bookmark(self, session_key: str, /, ref: str, label: str) -> str:
        """Label the node ``ref`` names (a label in use moves); returns the node's id.

        Raises:
            SessionError: ``ref`` names no node, or the label is not usable.
        """
        agent = await self._runtime.get(session_key)
        node_id = resolve_ref(agent.tree, ref)
        await self._sessions.bookmark(agent.tree, node_id, label)
        return node_id
