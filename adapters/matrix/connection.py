"""One Matrix account's connection: log in with its token, sync, join the rooms it may serve.

:meth:`MatrixConnection.run` is the account's whole life on the homeserver until it is
cancelled: it checks the token (``/account/whoami`` must name the configured ``user_id``),
joins the configured ``rooms`` it is not in yet, then long-polls ``/sync`` and accepts
each invitation to a room it may serve (any room when ``rooms`` is empty, else only
those). An invitation to another room is left pending, not declined, so adding the room
to ``rooms`` later and restarting takes it up.

The sync loop is our own rather than mautrix's ``Client.start``: each batch is handled
to the end before the next position is taken. A :class:`SyncHandler` (the account's
inbox) says where to resume at start, handles each batch's rooms, and is told the next
position only once it has handled them, so it can save it knowing nothing before it is
left to do. Connection failures,
timeouts, 5xx answers and rate limits are retried with a capped backoff, from the same
position; a refused token ends :meth:`run` with :class:`MatrixLoginError`. (mautrix's
``MLimitExceeded`` does not keep the answer's ``retry_after_ms``, so a rate-limited join
or sync waits the backoff; sending, which must honour it exactly, reads it itself:
:class:`~adapters.matrix.sending.MatrixSender`.)

The access token is registered with the log redaction on construction, and mautrix
sends it as a header, so neither a log line nor an error shows it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

import aiohttp
from mautrix.client import Client
from mautrix.errors import MatrixInvalidToken, MatrixRequestError
from mautrix.types import FilterID, RoomID, SyncToken, UserID

from adapters.matrix.errors import MATRIX_FAILURES, MatrixLoginError, is_retryable, matrix_said
from core.config import Config, MatrixAccountConfig
from core.logging import get_logger, register_secret

__all__ = ["MatrixConnection", "SyncHandler"]

_log = get_logger("adapters.matrix")

_T = TypeVar("_T")

SYNC_TIMEOUT_MS: Final = 30_000
"""How long one ``/sync`` long-poll waits for news before answering empty."""
TIMELINE_LIMIT: Final = 50
"""Events per room one ``/sync`` carries at most; a busier room's batch is *limited*,
and the handler reads the gap back (``/messages``)."""
FIRST_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 30.0


class SyncHandler(Protocol):
    """What the sync loop hands each batch to (the account's inbox)."""

    async def resume_from(self) -> str | None:
        """Where the first ``/sync`` starts: the position last saved, or None."""
        ...

    async def handle(self, rooms: Mapping[str, Any], /, *, since: str | None) -> None:
        """A batch's ``rooms``, synced from ``since``: everything in it handled on return."""
        ...

    async def handled(self, next_batch: str, /) -> None:
        """The batch before ``next_batch`` was handled to the end: resume after it."""
        ...


class MatrixConnection:
    """A logged-in Matrix account that syncs and joins the rooms it may serve."""

    def __init__(
        self,
        account_id: str,
        account: MatrixAccountConfig,
        access_token: str,
        /,
        *,
        session: aiohttp.ClientSession,
        sync_timeout_ms: int = SYNC_TIMEOUT_MS,
        timeline_limit: int = TIMELINE_LIMIT,
        handler: SyncHandler | None = None,
    ) -> None:
        register_secret(access_token)
        self.account_id = account_id
        self.account = account
        self.client = Client(
            mxid=UserID(account.user_id),
            base_url=account.homeserver,
            token=access_token,
            client_session=session,
        )
        self.joined_rooms: set[str] = set()
        """Rooms the account is in, as the last sync (or join) said."""
        self.device_id: str | None = None
        self._sync_timeout_ms = sync_timeout_ms
        self._first_sync = True
        """A long-poll a stopped process left in flight is answered from the homeserver's
        cache to a request with the same position, filter and timeout, holding only what
        woke it: the first sync of a process does not wait (timeout 0), so it is never
        that request and reads everything written since the position at once."""
        self._filter = json.dumps({"room": {"timeline": {"limit": timeline_limit}}})
        self._batch_backoff = FIRST_BACKOFF
        self.handler = handler
        self._since: SyncToken | None = None

    @classmethod
    def from_config(
        cls,
        config: Config,
        account_id: str,
        /,
        *,
        session: aiohttp.ClientSession,
        timeline_limit: int = TIMELINE_LIMIT,
    ) -> MatrixConnection:
        """The connection of ``[channels.matrix.accounts.<account_id>]``, with its token."""
        return cls(
            account_id,
            config.channels.matrix.accounts[account_id],
            config.matrix_access_token(account_id),
            session=session,
            timeline_limit=timeline_limit,
        )

    async def run(self) -> None:
        """Log in, join the configured rooms, then sync until cancelled.

        Raises:
            MatrixLoginError: the token was refused or is another user's.
        """
        await self.login()
        if self.handler is not None:
            resumed = await self.handler.resume_from()
            self._since = SyncToken(resumed) if resumed is not None else None
        for room_id in self.account.rooms:
            if room_id not in self.joined_rooms:
                await self._join(room_id, via="config")
        while True:
            await self.sync_once()

    async def login(self) -> None:
        """Check the token: ``whoami`` must answer with the configured user id.

        Raises:
            MatrixLoginError: the homeserver refused the token, or it is another user's.
        """
        try:
            whoami = await self._retrying("login", self.client.whoami)
        except MatrixInvalidToken as exc:
            raise self._login_error(
                f"the homeserver refused the token ({matrix_said(exc)})"
            ) from exc
        except MatrixRequestError as exc:
            raise self._login_error(f"the homeserver answered {matrix_said(exc)}") from exc
        if whoami.user_id != self.account.user_id:
            raise self._login_error(
                f"the token belongs to {whoami.user_id}, not to user_id {self.account.user_id}"
            )
        self.device_id = whoami.device_id
        self.joined_rooms = set(await self._retrying("login", self.client.get_joined_rooms))
        _log.info(
            "matrix.connected",
            account=self.account_id,
            user_id=self.account.user_id,
            device_id=self.device_id,
            rooms=len(self.joined_rooms),
        )

    async def sync_once(self) -> None:
        """One ``/sync`` from the last position, handled to the end before moving on."""
        try:
            data = await self._retrying(
                "sync",
                lambda: self.client.sync(
                    since=self._since,
                    timeout=0 if self._first_sync else self._sync_timeout_ms,
                    filter_id=FilterID(self._filter),
                ),
            )
            self._first_sync = False
        except MatrixInvalidToken as exc:
            raise self._login_error(
                f"the homeserver refused the token ({matrix_said(exc)})"
            ) from exc
        rooms = data.get("rooms") or {}
        await self._handle_rooms(rooms)
        next_batch = SyncToken(data["next_batch"])
        if self.handler is not None:
            try:
                await self.handler.handle(rooms, since=self._since)
                await self.handler.handled(next_batch)
            except Exception:
                # The store or a send failed mid-batch: the position stays, so the same
                # batch is read again (what was recorded is known by its id and not acted
                # on twice), and the account goes on rather than the bot stopping.
                _log.error(
                    "matrix.batch_failed",
                    account=self.account_id,
                    retry_in=self._batch_backoff,
                    exc_info=True,
                )
                await asyncio.sleep(self._batch_backoff)
                self._batch_backoff = min(self._batch_backoff * 2, MAX_BACKOFF)
                return
            self._batch_backoff = FIRST_BACKOFF
        self._since = next_batch

    def may_serve(self, room_id: str) -> bool:
        """Whether the account acts in ``room_id``: any room without ``rooms``, else those."""
        return not self.account.rooms or room_id in self.account.rooms

    async def _handle_rooms(self, rooms: Mapping[str, Any]) -> None:
        self.joined_rooms.update(rooms.get("join") or {})
        self.joined_rooms.difference_update(rooms.get("leave") or {})
        for room_id, invite in (rooms.get("invite") or {}).items():
            if room_id in self.joined_rooms:
                continue
            if self.may_serve(room_id):
                await self._join(room_id, via="invite")
            else:
                _log.info(
                    "matrix.invite_ignored",
                    account=self.account_id,
                    room_id=room_id,
                    inviter=_inviter(invite, self.account.user_id),
                )

    async def _join(self, room_id: str, *, via: str) -> None:
        """Join ``room_id``; a refusal is logged and the account goes on without it."""
        try:
            await self._retrying("join", lambda: self.client.join_room_by_id(RoomID(room_id)))
        except MatrixRequestError as exc:
            _log.warning(
                "matrix.join_failed",
                account=self.account_id,
                room_id=room_id,
                error=matrix_said(exc),
            )
            return
        self.joined_rooms.add(room_id)
        _log.info("matrix.room_joined", account=self.account_id, room_id=room_id, via=via)

    async def _retrying(self, what: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()``, again after a capped backoff while it fails in a way worth retrying
        (connection, timeout, 5xx, rate limit); any other failure is raised at once."""
        backoff = FIRST_BACKOFF
        while True:
            try:
                return await call()
            except MATRIX_FAILURES as exc:
                if not is_retryable(exc):
                    raise
                _log.warning(
                    "matrix.request_retried",
                    account=self.account_id,
                    request=what,
                    error=matrix_said(exc),
                    retry_in=backoff,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _login_error(self, reason: str) -> MatrixLoginError:
        return MatrixLoginError(self.account_id, self.account.access_token_env, reason)


def _inviter(invite: Mapping[str, Any], user_id: str) -> str | None:
    """Who sent the invitation, from the stripped state of an invited room."""
    for event in (invite.get("invite_state") or {}).get("events") or ():
        if event.get("type") == "m.room.member" and event.get("state_key") == user_id:
            sender = event.get("sender")
            return sender if isinstance(sender, str) else None
    return None
