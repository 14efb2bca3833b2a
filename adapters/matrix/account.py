"""Everything one Matrix account needs to act, built once per configured account.

:class:`MatrixAccount` builds the connection and its pieces (the sender, the thread
opener, the commands, the inbox, the presenters) and plugs one
:class:`~core.services.ChannelAccount` into the services: threads are opened by
:class:`~adapters.matrix.threads.MatrixThreads`, people's messages come through
:class:`~adapters.matrix.inbox.MatrixInbox`, announcements go out through
:class:`~adapters.matrix.completions.MatrixCompletionSink` (after what the thread's
presenter still sends), owed messages are finished by
:class:`~adapters.matrix.transcript.MatrixTranscriptSink`, the scheduler speaks through
:class:`~adapters.matrix.schedules.MatrixSchedules`, and a thread bound or let go is
told so with the same words as on Discord (:mod:`core.bindings.notices`).

The account is its connection's sync handler: each batch's encrypted rooms are told
once that they are not read (:mod:`adapters.matrix.encrypted`), and the first batch
after a restart is caught up (:mod:`adapters.matrix.catch_up`) before the inbox hands
its messages over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

import aiohttp

from adapters.matrix.approvals import MatrixApprovals
from adapters.matrix.catch_up import OfflineNotices
from adapters.matrix.commands import MatrixCommands
from adapters.matrix.completions import MatrixCompletionSink
from adapters.matrix.connection import TIMELINE_LIMIT, MatrixConnection
from adapters.matrix.encrypted import EncryptedRooms
from adapters.matrix.ids import CHANNEL
from adapters.matrix.inbox import MatrixInbox
from adapters.matrix.personas import AppService, PersonaVoices, server_of
from adapters.matrix.presenter import MatrixPresenters
from adapters.matrix.schedules import MatrixSchedules
from adapters.matrix.sending import MatrixSender
from adapters.matrix.threads import MatrixThreads
from adapters.matrix.transcript import MatrixTranscriptSink
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.clock import Clock
from core.events import DomainEvent
from core.logging import get_logger
from core.services import ChannelAccount, Services
from core.thread_notices import notice_for, tell_thread
from core.usecases import UseCases

__all__ = ["MatrixAccount"]

_log = get_logger("adapters.matrix")


class MatrixAccount:
    """One configured Matrix account, plugged into the services."""

    def __init__(
        self,
        account_id: str,
        services: Services,
        *,
        session: aiohttp.ClientSession,
        clock: Clock | None = None,
        min_edit_interval: float = 1.0,
        timeline_limit: int = TIMELINE_LIMIT,
    ) -> None:
        """``clock``: what the sends and edits are paced by (the services' by default)."""
        self.account_id = account_id
        self.services = services
        pace = clock or services.clock
        self.connection = MatrixConnection.from_config(
            services.config, account_id, session=session, timeline_limit=timeline_limit
        )
        client = self.connection.client
        self.sender = MatrixSender(client, clock=pace)
        self.threads = MatrixThreads(account_id, client)
        uses = UseCases.of(services)
        self.commands = MatrixCommands(account_id, client, uses, sender=self.sender)
        self.approvals = MatrixApprovals(
            account_id,
            client,
            self.sender,
            uses,
            admin_level=services.config.channels.matrix.accounts[account_id].admin_power_level,
        )
        self.inbox = MatrixInbox(
            account_id,
            client,
            services.inbox,
            services.bindings,
            commands=self.commands,
            approvals=self.approvals,
            sender=self.sender,
        )
        registration = services.config.matrix_appservice_registration(account_id)
        self.voices = PersonaVoices(
            client,
            self.sender,
            server_name=server_of(self.connection.account.user_id),
            service=AppService.load(registration) if registration is not None else None,
        )
        self.presenters = MatrixPresenters(
            account_id,
            self.sender,
            services,
            clock=pace,
            min_edit_interval=min_edit_interval,
            approvals=self.approvals,
            voices=self.voices,
        )
        self.completions = MatrixCompletionSink(
            account_id, client, self.sender, before_post=self._settle_presenter
        )
        self.catch_up = OfflineNotices(account_id, services.inbox, services.bindings, self._say)
        self.inbox.on_received = self.catch_up.received
        self.encrypted = EncryptedRooms(self.completions)
        self._resumed = False
        self.connection.handler = self
        services.plug(
            ChannelAccount(
                adapter=self.threads,
                inbox=self.inbox,
                completions=self.completions,
                transcript=MatrixTranscriptSink(
                    client, self.sender, self.completions, voices=self.voices
                ),
                schedules=MatrixSchedules(client, self.sender, self.completions),
                on_event=self.on_event,
            )
        )

    async def run(self) -> None:
        """The account's life on the homeserver, until cancelled: what a previous
        process left is picked up (once for all accounts), then the sync loop runs.

        Raises:
            MatrixLoginError: the token was refused or is another user's.
        """
        await self.services.pick_up()
        await self.connection.run()

    async def drain(self) -> None:
        """Wait for everything the presenters queued to be sent (a clean stop, tests)."""
        await self.presenters.drain()

    # -- the sync loop's handler -----------------------------------------------------

    async def resume_from(self) -> str | None:
        position = await self.inbox.resume_from()
        self._resumed = position is not None
        return position

    async def handle(self, rooms: Mapping[str, Any], /, *, since: str | None) -> None:
        await self.encrypted.check(rooms)
        catching_up, self._resumed = self._resumed and since is not None, False
        if not catching_up:
            await self.inbox.handle(rooms, since=since)
            return
        self.catch_up.begin()
        try:
            await self.inbox.handle(rooms, since=since)
        finally:
            await self.catch_up.finish()

    async def handled(self, next_batch: str, /) -> None:
        await self.inbox.handled(next_batch)

    # -- what the services tell the account --------------------------------------------

    def on_event(self, event: DomainEvent) -> Awaitable[None] | None:
        """The presenters follow the agents; a thread of this account bound: its intro;
        let go: its farewell. Returned to the stream, so the binding service's bind and
        unbind wait for them."""
        self.presenters.on_event(event)
        notice = notice_for(event)
        if notice is None or not self._mine(notice[1]):
            return None
        step, record, text = notice
        return tell_thread(step, record, text, self._say_in)

    def _mine(self, record: SessionBindingRecord) -> bool:
        conversation = record.conversation
        return conversation.channel == CHANNEL and conversation.account_id == self.account_id

    async def _say_in(self, record: SessionBindingRecord, text: str) -> None:
        await self._say(record.conversation, text)

    async def _say(self, conversation: ConversationRef, text: str) -> None:
        """The bot itself, speaking about the binding, in the thread (an ``m.notice``)."""
        await self.completions.send(conversation, text, notice=True)

    async def _settle_presenter(self, binding: SessionBindingRecord) -> None:
        """Everything the thread's presenter queued lands before an announcement, and so
        does a message a dead process left owed (the answer first, then its header)."""
        presenter = self.presenters.presenter(binding.binding_id)
        if presenter is not None:
            await presenter.drain()
        await self.services.transcript.settle_before_announcing(binding.binding_id)
