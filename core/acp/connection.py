"""One live session of an external agent over the Agent Client Protocol.

The bot is the agent's client: it starts the agent's process, initializes it
(advertising no file-system and no terminal capability: the agent works in its
workspace itself), opens a session there, or loads the one the session's log
names when the agent can load sessions, and prompts it. What the agent sends
back during a prompt (``session/update`` notifications, ``session/request_permission``
requests) goes to whoever runs the turn: a :class:`Listener`. What it sends while
loading a session is its replay of what was already said: it is dropped, never
shown twice.

Notifications are handed over synchronously, in the order they arrived, before
the answer to the prompt is seen (the SDK runs each in a task whose first step
reaches our handler without yielding), so a turn that ends when its prompt
returns has every update of that prompt already queued.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol, cast

from acp import PROTOCOL_VERSION, Client, RequestError, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from core.acp.groups import AgentGroups
from core.acp.process import AgentProcess, LaunchPlan
from core.clock import Clock, SystemClock
from core.errors import ProviderError
from core.logging import get_logger

__all__ = ["AcpConnection", "Listener", "Opened"]

EXIT_WAIT_SECONDS: Final = 2.0

_log = get_logger("core.acp")


class Listener(Protocol):
    """Whoever runs the turn the agent is answering."""

    def update(self, update: Any) -> None:
        """A ``session/update`` of the prompt; called in order, must not block."""
        ...

    async def permission(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        """The agent asks before a tool call: the person's choice, or ``cancelled``."""
        ...


@dataclass(frozen=True, slots=True)
class Opened:
    """The session the agent works in, and how it was reached."""

    session_id: str
    loaded: bool
    """The agent loaded the session the log named (False: it is a new one)."""
    can_load: bool
    """The agent advertises ``loadSession``: a restart can take this session up again."""
    images: bool = False
    """The agent reads images in a prompt."""


def cancelled() -> RequestPermissionResponse:
    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


class _Client:
    """The client side the agent calls back into (the SDK looks its methods up by name;
    what is not here, elicitation for one, is answered "method not found")."""

    def __init__(self) -> None:
        self.listener: Listener | None = None
        self.loading = False

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        listener = self.listener
        if self.loading or listener is None:
            return  # a replay of the conversation, or a stray update between turns
        listener.update(update)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        listener = self.listener
        if listener is None:
            return cancelled()
        return await listener.permission(tool_call, options)

    async def read_text_file(self, *_: Any, **__: Any) -> Any:
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, *_: Any, **__: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    async def create_terminal(self, *_: Any, **__: Any) -> Any:
        raise RequestError.method_not_found("terminal/create")


class AcpConnection:
    """The agent process of one session, and the protocol spoken with it."""

    def __init__(
        self,
        name: str,
        plan: Callable[[], LaunchPlan],
        *,
        start_timeout_seconds: float,
        clock: Clock | None = None,
        groups: AgentGroups | None = None,
        session_key: str = "",
    ) -> None:
        self.name = name
        self._plan = plan
        self._groups = groups
        """Where each process's group is recorded while it runs (the bot's store)."""
        self._session_key = session_key
        self._clock: Clock = clock or SystemClock()
        self._timeout = start_timeout_seconds
        self._client = _Client()
        self._process: AgentProcess | None = None
        self._conn: ClientSideConnection | None = None
        self._session_id: str | None = None
        self._lock = asyncio.Lock()
        self.prompting = False
        self.idle_since: datetime = self._clock.now()
        """When the last prompt ended (or the connection was made): the idle stop's clock."""
        self.reported_cost: float | None = None
        """The process's running cost total as the agent last reported it (USD)."""

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.alive and self._conn is not None

    @property
    def session_id(self) -> str | None:
        return self._session_id

    async def open(self, stored: Mapping[str, Any] | None) -> Opened | None:
        """Start the agent if it is not running and open its session; None when it was
        running already (its session is open). ``stored`` is the session the log names
        (``session_id``), to load when the agent can.

        Raises:
            ProviderError: the agent could not be started, initialized or given a session.
        """
        async with self._lock:
            if self.alive:
                return None
            await self._close()
            try:
                async with asyncio.timeout(self._timeout):
                    return await self._start(stored)
            except TimeoutError:
                await self._close()
                raise ProviderError(
                    f"the external agent {self.name!r} did not start its session within "
                    f"{self._timeout:g} seconds"
                ) from None
            except (ConnectionError, RequestError, OSError) as exc:
                await self._close()
                raise ProviderError(
                    f"the external agent {self.name!r} could not open a session: {_said(exc)}"
                ) from None

    async def _start(self, stored: Mapping[str, Any] | None) -> Opened:
        plan = self._plan()
        self._process = await AgentProcess.start(self.name, plan)
        await self._record(self._process.process.pid)
        process = self._process.process
        assert process.stdin is not None
        assert process.stdout is not None
        client = cast(Client, self._client)  # duck-typed: the SDK resolves methods by name
        self._conn = connect_to_agent(client, process.stdin, process.stdout)
        init = await self._conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False,
            ),
            client_info=Implementation(name="threadbound", version="0.1.0"),
        )
        capabilities = init.agent_capabilities
        can_load = bool(capabilities and capabilities.load_session)
        prompts = capabilities.prompt_capabilities if capabilities else None
        images = bool(prompts and prompts.image)
        cwd = str(plan.cwd)
        known = str(stored["session_id"]) if stored and stored.get("session_id") else None
        if known is not None and can_load:
            self._client.loading = True
            try:
                await self._conn.load_session(cwd=cwd, session_id=known, mcp_servers=[])
            except RequestError as exc:
                _log.warning("acp.load_failed", agent=self.name, error=_said(exc))
            else:
                self._session_id = known
                return Opened(known, loaded=True, can_load=True, images=images)
            finally:
                self._client.loading = False
        created = await self._conn.new_session(cwd=cwd, mcp_servers=[])
        self._session_id = created.session_id
        return Opened(created.session_id, loaded=False, can_load=can_load, images=images)

    async def _record(self, pid: int) -> None:
        """Record the new process's group, so a bot killed while it runs leaves it to be
        stopped by the next; an agent that cannot be recorded is not kept running."""
        if self._groups is None:
            return
        try:
            await self._groups.record(pid, agent=self.name, session_key=self._session_key)
        except Exception as exc:
            await self._close()
            raise ProviderError(
                f"the external agent {self.name!r} was started but its process could not be "
                f"recorded in the store ({type(exc).__name__}), so it was stopped again: a "
                "crash of the bot would have left it running"
            ) from None

    async def prompt(self, blocks: list[Any], listener: Listener) -> PromptResponse:
        """Prompt the agent; its updates go to ``listener`` until it answers.

        Raises:
            ProviderError: the agent went away (its process ended) or answered an error.
        """
        conn, session_id = self._conn, self._session_id
        if conn is None or session_id is None:
            raise ProviderError(f"the external agent {self.name!r} has no open session")
        self._client.listener = listener
        self.prompting = True
        try:
            return await conn.prompt(session_id=session_id, prompt=blocks)
        except ConnectionError:
            code = await self._exit_status()
            raise ProviderError(
                f"the external agent {self.name!r} stopped in the middle of the turn"
                + (f" (exit status {code})" if code is not None else "")
            ) from None
        except RequestError as exc:
            said = _said(exc)
            raise ProviderError(f"the external agent {self.name!r} answered: {said}") from None
        finally:
            self._client.listener = None
            self.prompting = False
            self.idle_since = self._clock.now()

    async def _exit_status(self) -> int | None:
        """The exit status of a process whose output just ended (it is exiting)."""
        process = self._process.process if self._process is not None else None
        if process is None:
            return None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EXIT_WAIT_SECONDS):
                await process.wait()
        return process.returncode

    async def cancel(self) -> None:
        """Ask the agent to stop the prompt under way (it answers it as ``cancelled``)."""
        conn, session_id = self._conn, self._session_id
        if conn is None or session_id is None or not self.alive:
            return
        try:
            await conn.cancel(session_id=session_id)
        except (ConnectionError, RequestError, OSError):
            _log.info("acp.cancel_failed", agent=self.name)

    async def close(self) -> None:
        """Stop the agent's process (and its group)."""
        async with self._lock:
            await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        process, self._process = self._process, None
        self._session_id = None
        self.reported_cost = None
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                _log.debug("acp.close_failed", agent=self.name, exc_info=True)
        if process is not None:
            await process.stop()
            await self._forget(process.process.pid)

    async def _forget(self, pid: int) -> None:
        if self._groups is None:
            return
        try:
            await self._groups.forget(pid)
        except Exception:  # the group is stopped: a stale row only costs a check later
            _log.warning("acp.forget_failed", agent=self.name, pid=pid, exc_info=True)


def _said(exc: BaseException) -> str:
    if isinstance(exc, RequestError):
        return f"{exc} (code {exc.code})"
    return f"{type(exc).__name__}: {exc}"
