"""Everything one bot account needs to act in Discord, built once per account.

The manager (threads, their hello and goodbye), the webhook pool and the persona delivery
belong to the account; the presenters show each bound session's agent in its
thread. One object per account keeps the commands and the message handler
working on the same state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any

import discord

from adapters.discord.approvals import ApprovalMessages
from adapters.discord.catch_up import CatchUp
from adapters.discord.completions import DiscordCompletionSink
from adapters.discord.delivery import (
    DEFAULT_PERSONA,
    THREAD_DELETED,
    Persona,
    ThreadDelivery,
    persona_of,
)
from adapters.discord.ids import conversation_for
from adapters.discord.inbox import DiscordInbox
from adapters.discord.manager import ManagerRegistry, ThreadBindingManager
from adapters.discord.presenter import ThreadPresenter
from adapters.discord.schedules import DiscordSchedules
from adapters.discord.transcript import DiscordTranscriptSink
from adapters.discord.webhooks import WebhookPool
from core.agent.agent import Agent
from core.bindings.records import SessionBindingRecord
from core.events import AgentStarted, BindingEnded, BindingStarted, BindingUpdated, DomainEvent
from core.logging import get_logger
from core.services import ChannelAccount, Services
from core.thread_notices import notice_for, tell_thread

__all__ = ["DEFAULT_PERSONA", "AccountRuntime", "persona_of"]

_log = get_logger("adapters.discord")


class AccountRuntime:
    """One account's Discord-side services."""

    def __init__(
        self,
        account_id: str,
        client: discord.Client,
        services: Services,
        managers: ManagerRegistry,
        *,
        min_edit_interval: float = 1.0,
    ) -> None:
        self.account_id = account_id
        self.services = services
        self.settings = services.config.discord
        """The ``[discord]`` table: what this account's Discord side is set to."""
        self.manager: ThreadBindingManager = managers.get_or_create(account_id, client)
        self.webhooks = WebhookPool(
            self.manager,
            clock=services.clock,
            requests_per_second=self.settings.webhook_requests_per_second,
            per_channel=self.settings.webhooks_per_channel,
        )
        self.delivery = ThreadDelivery(self.manager, self.webhooks, services.bindings)
        self.approvals = ApprovalMessages(self.delivery)
        self.inbox = DiscordInbox(
            account_id,
            client,
            services.inbox,
            services.bindings,
            allow_bots=self.settings.allow_bots,
            in_background=self.run_in_background,
        )
        self.catch_up = CatchUp(
            account_id,
            client,
            services.inbox,
            services.bindings,
            self.delivery,
            limit=self.settings.catch_up_max_messages,
            is_person=self.inbox.is_person,
        )
        self._presenters: dict[str, tuple[Agent, Persona, ThreadPresenter]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.in_progress: set[tuple[str, ...]] = set()
        """Work on one binding that must not run twice at once (a double press, say)."""
        self._min_edit_interval = min_edit_interval
        # Who shows an agent in a thread is decided here alone: when an agent is built
        # (first use, a restart, after a crash or eviction) and when a thread is bound.
        self.manager.archive_minutes = self.settings.thread_auto_archive_minutes
        completions = DiscordCompletionSink(self.delivery, before_post=self._settle_presenter)
        services.plug(
            ChannelAccount(
                adapter=self.manager,
                inbox=self.inbox,
                completions=completions,
                transcript=DiscordTranscriptSink(self.delivery),
                schedules=DiscordSchedules(self.delivery, completions),
                on_event=self._tell_thread,  # its hello and goodbye, once
            )
        )

    def _tell_thread(self, event: DomainEvent) -> Awaitable[None] | None:
        """A thread of this account bound: its intro; let go: its farewell. Returned to
        the stream, so the binding service's bind and unbind wait for them (a spawn's
        reply says the thread is introduced; a clean stop waits for farewells)."""
        notice = notice_for(event)
        if notice is None or not self._mine(notice[1]):
            return None
        step, record, text = notice
        return tell_thread(step, record, text, self.manager.say)

    def _mine(self, record: SessionBindingRecord) -> bool:
        conversation = record.conversation
        return conversation.channel == "discord" and conversation.account_id == self.account_id

    def on_event(self, event: DomainEvent) -> None:
        """What the services tell this account (its client subscribes it, once)."""
        match event:
            case AgentStarted(agent=agent):
                self._agent_started(agent)
            case BindingStarted(record=record):
                self._show_resident(record)
            case BindingEnded(record=record):
                self._binding_ended(record)
            case BindingUpdated(record=record, changed=changed) if "persona" in changed:
                self._show_resident(record)  # under the persona a handoff brought in
            case _:
                pass

    def _agent_started(self, agent: Agent) -> None:
        """Any agent built for a session bound here (first use, or rebuilt) is shown there."""
        for binding in self.services.bindings.list_by_session(agent.session_key):
            if self._shows(binding):
                self.present(binding, agent)

    def _show_resident(self, record: SessionBindingRecord) -> None:
        """A thread bound (or its persona changed) while its session's agent is in memory
        shows it from now, as the binding says."""
        agent = self.services.runtime.peek(record.target_session_key)
        if agent is not None and self._shows(record):
            self.present(record, agent)

    def _shows(self, binding: SessionBindingRecord) -> bool:
        conversation = binding.conversation
        return (
            binding.status == "active"
            and conversation.channel == "discord"
            and conversation.account_id == self.account_id
        )

    async def thread_deleted(self, thread_id: int, parent_id: int | None = None) -> None:
        """Discord deleted a thread: its binding here ends ``thread-deleted``, without farewell.

        A send into it would find out and end it the same way, but an idle
        session sends nothing: its binding would stay live on a thread that is gone.
        """
        ref = conversation_for(self.account_id, thread_id, parent_id)
        record = self.services.bindings.resolve_by_conversation(ref)
        if record is not None:
            await self.delivery.end_binding(record, THREAD_DELETED)

    def _binding_ended(self, record: SessionBindingRecord) -> None:
        """An ended binding's thread shows its agent no more (the agent may live on elsewhere).

        Only this account's presenters are keyed by the binding: another's is left alone."""
        entry = self._presenters.pop(record.binding_id, None)
        if entry is not None:
            entry[2].detach()

    async def _settle_presenter(self, binding: SessionBindingRecord) -> None:
        """Everything the thread's presenter queued lands before an announcement, and so
        does a message a dead process left cut (the answer first, then its header)."""
        presenter = self.presenter(binding.binding_id)
        if presenter is not None:
            await presenter.drain()
        await self.services.transcript.settle_before_announcing(binding.binding_id)

    def present(self, record: SessionBindingRecord, agent: Agent) -> ThreadPresenter:
        """Show ``agent`` in ``record``'s thread (once per agent instance and persona)."""
        persona = persona_of(record)
        current = self._presenters.get(record.binding_id)
        if current is not None and current[0] is agent and current[1] == persona:
            return current[2]
        if current is not None:
            current[2].detach()  # the agent was rebuilt (eviction, restart) or handed over
        presenter = ThreadPresenter(
            self.delivery,
            record,
            persona,
            clock=self.services.clock,
            min_edit_interval=self._min_edit_interval,
            show_tool_calls=self.settings.show_tool_calls == "compact",
            approvals=self.approvals,
            transcript=self.services.transcript,
        )
        presenter.attach(agent)
        self._presenters[record.binding_id] = (agent, persona, presenter)
        return presenter

    def run_in_background(self, work: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        """Run ``work`` as a task this account owns until it finishes; :meth:`drain` (and
        so a clean stop, before the client closes) waits for it.

        asyncio holds only weak references to tasks; a task kept by nothing
        else can be collected before it runs to the end.
        """
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def presenter_for(self, session_key: str) -> ThreadPresenter | None:
        """A presenter showing ``session_key`` here, if any."""
        return next(
            (p for agent, _, p in self._presenters.values() if agent.session_key == session_key),
            None,
        )

    def presenter(self, binding_id: str) -> ThreadPresenter | None:
        entry = self._presenters.get(binding_id)
        return entry[2] if entry else None

    async def drain(self) -> None:
        """Wait for everything queued for Discord to be sent (tests, shutdown)."""
        for _, _, presenter in list(self._presenters.values()):
            await presenter.drain()
        await asyncio.gather(*self._background, return_exceptions=True)
