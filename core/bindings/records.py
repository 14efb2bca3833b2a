"""The value types of the binding contract: where a conversation is, and what is bound to it.

They are frozen pydantic models so a record handed to a caller can never be
changed behind the service's back; the service replaces records instead.
Field names follow SPEC.md; only the seed's fields are required.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from core.config.tables import DEFAULT_DISPLAY_NAME, AgentProfile, agent_display_name
from core.sessions.payloads import SteerOrFollowUp

__all__ = [
    "BindingEnded",
    "BindingMetadata",
    "BindingPersona",
    "BindingStarted",
    "BindingStatus",
    "BindingTargetKind",
    "BindingUpdated",
    "ConversationKey",
    "ConversationRef",
    "ExpiryReason",
    "SessionBindingRecord",
]

BindingTargetKind = Literal["subagent", "session", "acp"]
BindingStatus = Literal["active", "ending", "ended"]
ExpiryReason = Literal["idle-expired", "max-age-expired"]
"""Why a binding expired; also the ``reason`` of its farewell and ``binding.expired`` line."""

ConversationKey = tuple[str, str, str]
"""``(channel, account_id, conversation_id)``: the identity of a conversation."""


class ConversationRef(BaseModel):
    """A place messages can go: a channel, the account that speaks there, a conversation.

    ``channel`` is lower-cased here so that "Discord" and "discord" are one channel.
    Ids are strings; adapters strip channel-style prefixes (``channel:123``) before
    building a ref, because a prefixed id sent to a channel's API is the most common
    upstream failure.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str
    account_id: str
    conversation_id: str
    parent_conversation_id: str | None = None

    @field_validator("channel")
    @classmethod
    def _lower_channel(cls, value: str) -> str:
        return sys.intern(value.strip().lower())

    @field_validator("account_id")
    @classmethod
    def _intern_account(cls, value: str) -> str:
        # A handful of channels and accounts are shared by every binding: one
        # string each saves memory and turns the router's comparisons into
        # identity checks.
        return sys.intern(value)

    @property
    def key(self) -> ConversationKey:
        """The identity used by indexes; the parent is not part of it."""
        return (self.channel, self.account_id, self.conversation_id)

    def describe(self) -> str:
        """A short human-readable name, safe for logs and error messages."""
        return f"{self.channel}/{self.account_id}/{self.conversation_id or '<new>'}"

    def new_beside(self) -> ConversationRef:
        """A request to bind a new conversation next to this one: same channel and
        account, under this one's parent (a thread's channel), or under this one."""
        return ConversationRef(
            channel=self.channel,
            account_id=self.account_id,
            conversation_id="",
            parent_conversation_id=self.parent_conversation_id or self.conversation_id,
        )


class BindingPersona(BaseModel):
    """Who the session speaks as in the conversation: a name, and an avatar's address."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    avatar_url: str | None = None

    @property
    def shown_name(self) -> str:
        """The name people see it speak under: its own, else the agents' default name."""
        return self.name or DEFAULT_DISPLAY_NAME

    @classmethod
    def of_agent(cls, profiles: Mapping[str, AgentProfile], agent: str | None) -> BindingPersona:
        """The persona ``agent`` speaks under: its profile's display name and avatar; without
        a profile, the default name and no avatar (never a name taken from the id).

        The one way a persona is built from an agent, for a spawn's thread and for
        the agent a handoff brings in: built apart, the copies drifted.
        """
        profile = profiles.get(agent or "")
        return cls(
            name=agent_display_name(profiles, agent),
            avatar_url=(profile.avatar_url or None) if profile is not None else None,
        )


class BindingMetadata(BaseModel):
    """What a binding's metadata says, typed: the keys the bot itself writes and reads.

    The record keeps the metadata as the plain mapping it stores (and compares);
    read it through :attr:`SessionBindingRecord.meta`. Keys a caller added of its
    own (a spawn's ``metadata``) are kept as they are.

    Written the same way: a change is a ``BindingMetadata`` naming only the keys it
    sets (``BindingMetadata(default_mode="follow_up")``), which
    :meth:`~core.bindings.service.SessionBindingService.update_metadata` merges into
    the stored mapping (:meth:`changes`): the keys it does not name are left as
    they are.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    persona: BindingPersona = Field(default_factory=BindingPersona)
    agent: str | None = None
    """The agent profile that speaks in the conversation now (a handoff changes it)."""
    spawn_mode: str | None = None
    requester_conversation_id: str | None = None
    """Where the spawn that made the binding was asked from."""
    thread_name: str | None = None
    """The name of the thread to open, for a binding that opens one."""
    task: str | None = None
    """The task a spawn opened the conversation for, whole: a channel whose threads
    hang from a message (Matrix) shows it there."""
    default_mode: SteerOrFollowUp | None = None
    """How a plain message reaches a running agent (``/session mode``); None: steer."""
    status_message_id: str | None = None
    """The message that is the conversation's status line."""
    brief_prompts: dict[str, int] = Field(default_factory=dict)
    """Agent -> the session's last seq when its "produce the brief" button was posted there."""
    brief_prompted: tuple[str, ...] = ()
    """The agents whose button was ever posted there (the earlier rule's key)."""
    handed_off_from: str | None = None
    """The conversation a handoff to a new thread left."""
    read_after: str | None = None
    """The channel's id before which nothing in the conversation is the session's
    (the command that bound an existing thread)."""
    webhook_id: str | None = None
    """The persona webhook the conversation's messages are posted through (a webhook
    edits only its own messages, and a channel's threads are spread over several)."""
    kept_after_run: bool = False
    """A run-mode subagent's thread that stays bound once its task ended (a scheduled
    run's): a reply there continues that run's session, until the idle window ends it."""

    def changes(self) -> dict[str, Any]:
        """The keys this value sets, as stored: what merging it into a binding writes."""
        return self.model_dump(mode="json", exclude_unset=True)


class SessionBindingRecord(BaseModel):
    """One binding of a target session to a conversation.

    ``expires_at`` is the hard deadline (bound_at + max age, or + ttl); the idle
    deadline moves with ``last_activity_at`` and is enforced by the sweeper.
    ``0`` for ``idle_timeout_ms`` / ``max_age_ms`` means "never".
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    binding_id: str
    target_session_key: str
    target_kind: BindingTargetKind
    conversation: ConversationRef
    status: BindingStatus
    bound_at: AwareDatetime
    expires_at: AwareDatetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    bound_by: str | None = None
    scope: str | None = None
    """Where the conversation is (a Discord guild id, as text; None: in none, like a DM).
    The runtime flags and the shards that answer for the binding go by it."""
    last_activity_at: AwareDatetime | None = None
    idle_timeout_ms: int = Field(default=0, ge=0)
    max_age_ms: int = Field(default=0, ge=0)

    @property
    def meta(self) -> BindingMetadata:
        """The metadata, typed (validated at each read: a record is copied, never changed)."""
        return BindingMetadata.model_validate(self.metadata)

    def is_live(self, now: datetime) -> bool:
        """Active and not past its hard deadline: the only kind the router may resolve."""
        return self.status == "active" and (self.expires_at is None or self.expires_at > now)

    def expiry_reason(self, now: datetime) -> ExpiryReason | None:
        """``idle-expired`` / ``max-age-expired`` for whichever deadline passed first, else None.

        A pure function of the record's own fields, so it lives here: the
        service (which ends bindings) and the sweeper (which picks candidates)
        both ask the record, and neither has to import the other for it.
        ``expires_at`` wins over ``max_age_ms`` because a ttl replaces the max age.
        """
        deadlines: list[tuple[datetime, ExpiryReason]] = []
        if self.idle_timeout_ms:
            last = self.last_activity_at or self.bound_at
            deadlines.append((last + timedelta(milliseconds=self.idle_timeout_ms), "idle-expired"))
        if self.expires_at is not None:
            deadlines.append((self.expires_at, "max-age-expired"))
        elif self.max_age_ms:
            deadlines.append(
                (self.bound_at + timedelta(milliseconds=self.max_age_ms), "max-age-expired")
            )
        passed = [deadline for deadline in deadlines if deadline[0] <= now]
        return min(passed)[1] if passed else None

    def log_fields(self) -> dict[str, Any]:
        """The identity fields every ``binding.*`` log event carries."""
        return {
            "binding_id": self.binding_id,
            "target_session_key": self.target_session_key,
            "channel": self.conversation.channel,
            "account": self.conversation.account_id,
            "conversation_id": self.conversation.conversation_id,
            "guild": self.scope,
        }


@dataclass(frozen=True, slots=True)
class BindingStarted:
    """A conversation was bound here (this process made the binding), committed: whatever
    shows the session there attaches now, and the channel says hello (the binding
    service waits for that reaction before its bind returns)."""

    record: SessionBindingRecord


@dataclass(frozen=True, slots=True)
class BindingUpdated:
    """A live binding's metadata changed, committed (its persona after a handoff, its
    default mode, its status line): ``changed`` names the keys written. Whatever shows
    the conversation follows it from here, so no caller must remember to."""

    record: SessionBindingRecord
    changed: frozenset[str]


@dataclass(frozen=True, slots=True)
class BindingEnded:
    """A binding ended (``reason``: its end reason), committed: the conversation shows its
    session no more, and the channel says goodbye (awaited, as for the hello)."""

    record: SessionBindingRecord
    reason: str
