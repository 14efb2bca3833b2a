"""What a chat app may ask of the domain: the use cases, one object per decision.

A command or a button parses what it was given, makes one call here and renders
the result. Nothing behind these objects is channel-specific, so a second chat
platform (or a scheduler) asks the same questions and gets the same answers.
Everything a command needs of the configuration comes through here too (the
agent profiles, the Discord settings), not by reaching into the services.

Built over :class:`core.services.Services` by :meth:`UseCases.of`; the objects
keep no state of their own beyond the services', so building them is cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.approvals import Approvals
from core.bindings.focus import Focus
from core.bindings.records import ConversationRef
from core.bindings.service import SessionBindingService
from core.config import AgentProfile, Config
from core.config.tables import DiscordEndpointsConfig
from core.control import SessionControl
from core.handoffs.accept import Handoffs
from core.handoffs.brief import Briefs
from core.inbox import Inbox
from core.overrides import RuntimeOverrides
from core.scheduler.service import Schedules
from core.services import Services
from core.subagents.brief_offers import BriefOffers
from core.subagents.overview import SubagentOverview
from core.subagents.owners import Owners
from core.subagents.service import SubagentService

__all__ = ["UseCases"]


@dataclass(frozen=True, slots=True)
class UseCases:
    """The use cases, and the configuration the apps read.

    Attributes:
        config: the whole configuration: the flags ``/config`` reads and overrides.
        profiles: the agent profiles (personas, who hands off to whom).
        discord: the ``[discord]`` settings (command guilds, operators).
        overrides: the flags' runtime overrides (``/config set``).
        bindings: which session a conversation speaks for, and its windows and mode.
        inbox: a person's message into its session (``/steer``, ``/followup``).
        owners: who may change a session.
        sessions: read and change one session (model, compaction, cancel, rewind …).
        handoffs: Accept and Reject of an offered handoff.
        briefs: producing the brief (the consolidation turn, the offer).
        brief_offers: when and where the brief button is offered.
        approvals: Allow / Deny of a tool call.
        subagents: ``/agents list``'s overview.
        spawns: ``/agents spawn``: a person's spawn request, checked, then started.
        focus: one more conversation for an existing session.
        schedules: scheduled jobs (``/schedule``).
    """

    config: Config
    profiles: Mapping[str, AgentProfile]
    discord: DiscordEndpointsConfig
    overrides: RuntimeOverrides
    bindings: SessionBindingService
    inbox: Inbox
    owners: Owners
    sessions: SessionControl
    handoffs: Handoffs
    briefs: Briefs
    brief_offers: BriefOffers
    approvals: Approvals
    subagents: SubagentOverview
    spawns: SubagentService
    focus: Focus
    schedules: Schedules

    @classmethod
    def of(cls, services: Services) -> UseCases:
        """The use cases over ``services``."""
        config = services.config
        profiles = config.agents
        bindings = services.bindings
        runtime = services.runtime
        sessions = services.sessions
        owners = Owners(bindings, services.subagents)
        return cls(
            config=config,
            profiles=profiles,
            discord=config.discord,
            overrides=services.overrides,
            bindings=bindings,
            inbox=services.inbox,
            owners=owners,
            sessions=SessionControl(runtime, sessions, services.agent_factory, services.artifacts),
            handoffs=Handoffs(runtime, services.handoffs, bindings, profiles),
            briefs=services.briefs,
            brief_offers=BriefOffers(bindings, profiles, runtime, sessions, services.subagents),
            approvals=Approvals(sessions, runtime),
            subagents=SubagentOverview(services.subagents, runtime, bindings, services.database),
            spawns=services.subagents,
            focus=Focus(bindings, services.database, owners),
            schedules=services.schedules,
        )

    def answers_for(self, conversation: ConversationRef, /) -> bool:
        """Whether this process answers for ``conversation``: its binding's guild is on our
        shards (a conversation bound to nothing is shard 0's)."""
        binding = self.bindings.resolve_by_conversation(conversation)
        if binding is None:
            return self.bindings.shards.owns_scope(None)
        return self.bindings.mine(binding)
