"""ThreadBindingManager: the Discord side of bindings, one per bot account.

It implements core's ``ChannelAdapter`` port (open a thread when a bind names
no conversation), and says hello and goodbye in a bound thread when the account
reacts to the binding events (see :class:`adapters.discord.account.AccountRuntime`).
It holds the account's discord.py
client and reads it at every call, never a copy of its HTTP session: when a
manager is reused for a client logged in with a new token, every later REST
call must use that token (upstream kept the old session and went on calling
with a revoked token).

Discord refusing a thread (a missing permission, an outage) becomes a
:class:`BindingError` that says what to fix: a raw ``discord.Forbidden`` would
escape the spawn use case unexplained and leave the user's command waiting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import discord

from adapters.discord.errors import discord_said
from adapters.discord.ids import CHANNEL, conversation_for, snowflake
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.errors import BindingError
from core.logging import get_logger

__all__ = ["ManagerRegistry", "ThreadBindingManager"]

if TYPE_CHECKING:
    from discord.types.threads import ThreadArchiveDuration

_log = get_logger("adapters.discord")

THREAD_NAME_LIMIT = 100
DEFAULT_ARCHIVE_MINUTES: ThreadArchiveDuration = 10080
THREAD_PERMISSIONS = "View Channel, Create Public Threads and Send Messages in Threads"


@contextlib.contextmanager
def _thread_refusals(channel_id: str | int) -> Iterator[None]:
    """Discord's refusal to open a thread under ``channel_id``, as a BindingError to act on."""
    try:
        yield
    except discord.Forbidden as exc:
        raise BindingError(
            f"I can't create threads in <#{channel_id}> ({discord_said(exc)}): give me "
            f"{THREAD_PERMISSIONS} there, then try again."
        ) from exc
    except discord.HTTPException as exc:
        raise BindingError(
            f"Discord could not create a thread in <#{channel_id}> ({discord_said(exc)}); "
            "nothing was started, try again in a moment."
        ) from exc


class ThreadBindingManager:
    """Thread creation, intro and farewell for one account."""

    def __init__(self, account_id: str, client: discord.Client) -> None:
        self._account_id = account_id
        self._client = client
        self.archive_minutes: ThreadArchiveDuration = DEFAULT_ARCHIVE_MINUTES
        """``auto_archive_duration`` of the threads it opens (``[discord]`` sets it)."""

    @property
    def channel(self) -> str:
        return CHANNEL

    @property
    def account_id(self) -> str:
        return self._account_id

    @property
    def client(self) -> discord.Client:
        return self._client

    def rebind(self, client: discord.Client) -> None:
        """Use ``client`` (and so its token) for everything from now on."""
        if client is not self._client:
            _log.info("discord.manager_rebound", account=self._account_id)
        self._client = client

    async def fetch_channel(self, channel_id: str | int) -> Any:
        """A channel or thread, from the cache or, failing that, from Discord."""
        key = snowflake(channel_id)
        return self._client.get_channel(key) or await self._client.fetch_channel(key)

    # -- ChannelAdapter ----------------------------------------------------------

    async def create_conversation(
        self,
        requested: ConversationRef,
        *,
        target_session_key: str,
        metadata: dict[str, Any],
    ) -> ConversationRef:
        """A new public thread in the requester's parent channel.

        Spawning from inside a bound thread still opens the new thread in that
        thread's parent: threads cannot nest.

        Raises:
            BindingError: no parent channel, one that cannot hold threads, or
                Discord refused (the message names the permissions to grant).
        """
        if not requested.parent_conversation_id:
            raise BindingError("a thread needs a parent channel; the request named none")
        with _thread_refusals(requested.parent_conversation_id):
            parent = await self.fetch_channel(requested.parent_conversation_id)
            if isinstance(parent, discord.Thread):
                parent = parent.parent or await self.fetch_channel(parent.parent_id)
        if not isinstance(parent, discord.TextChannel):
            raise BindingError(
                f"channel {requested.parent_conversation_id} cannot hold threads; "
                "spawn from a text channel"
            )
        name = str(metadata.get("thread_name") or target_session_key)[:THREAD_NAME_LIMIT]
        with _thread_refusals(parent.id):
            thread = await parent.create_thread(
                name=name,
                type=discord.ChannelType.public_thread,
                auto_archive_duration=self.archive_minutes,
            )
        return conversation_for(self._account_id, thread.id, parent.id)

    # -- what a bound thread is told ---------------------------------------------

    async def say(self, record: SessionBindingRecord, text: str) -> None:
        """The bot itself, in the bound thread (a binding's intro or farewell)."""
        thread = await self.fetch_channel(record.conversation.conversation_id)
        await thread.send(text, allowed_mentions=discord.AllowedMentions.none())


class ManagerRegistry:
    """Exactly one manager per account, reused across client restarts."""

    def __init__(self) -> None:
        self._managers: dict[str, ThreadBindingManager] = {}

    def get_or_create(self, account_id: str, client: discord.Client) -> ThreadBindingManager:
        """The account's manager, switched to ``client`` if it already existed."""
        manager = self._managers.get(account_id)
        if manager is None:
            manager = self._managers[account_id] = ThreadBindingManager(account_id, client)
        else:
            manager.rebind(client)
        return manager

    def get(self, account_id: str) -> ThreadBindingManager | None:
        return self._managers.get(account_id)
