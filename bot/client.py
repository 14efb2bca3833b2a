"""The discord.py client of one bot account: commands, and messages in bound threads."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from adapters.discord.inbox import MODE_MARKS
from adapters.discord.manager import ManagerRegistry
from adapters.discord.pacing import Pacer, pace_session
from adapters.discord.rate_limits import RateLimitWatch
from bot.approvals import recover_approval, setup_approvals
from bot.commands.agents import AgentsGroup
from bot.commands.artifacts import ArtifactsCommands
from bot.commands.bound import uses_of
from bot.commands.config import ConfigGroup
from bot.commands.focus import FocusCommands
from bot.commands.help import HelpCommands
from bot.commands.schedule import ScheduleGroup, setup_schedules
from bot.commands.session import SessionGroup
from bot.commands.session_model import SessionModelCommands
from bot.commands.steering import SteeringCommands
from bot.commands.tree import TreeCommands
from bot.handoffs import offer_missed_briefs, setup_handoffs, subagent_finished, watch_turns
from bot.handoffs.brief import recover_brief
from bot.handoffs.views import recover_handoff
from bot.mentions import on_mention
from bot.presses import recover_presses
from bot.wiring import Services
from core.events import AgentStarted, DomainEvent, SubagentFinished
from core.logging import get_logger

__all__ = [
    "MODE_MARKS",
    "ShardedThreadboundClient",
    "ThreadboundClient",
    "client_for",
    "intents",
]

_log = get_logger("bot.client")


def intents() -> discord.Intents:
    """Guilds and messages, with message content: a bound thread is read without mentions."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    return wanted


class _TopLevelCommands(Protocol):
    """A feature whose commands are top-level (``/steer``, ``/tree``): its handlers are
    its methods, made into commands by :meth:`commands`."""

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]: ...


class ThreadboundClient(discord.Client):
    """One per configured account; everything it uses comes from :class:`Services`.

    One gateway connection; :class:`ShardedThreadboundClient` is the same bot
    over several (see :func:`client_for`).
    """

    def __init__(
        self,
        account_id: str,
        services: Services,
        managers: ManagerRegistry,
        *,
        min_edit_interval: float = 1.0,
        client_intents: discord.Intents | None = None,
    ) -> None:
        # The default of every send, edit, interaction answer and webhook message made
        # through this client: user and model text echoed by the bot never pings anyone.
        self.rate_limits = RateLimitWatch(account_id)
        # Every request of the bot's token paced under Discord's global limit (this
        # process's share of it), people first, as it is sent (after discord.py's wait
        # in the route's bucket).
        self.pacer = Pacer(services.config.discord.process_requests_per_second)
        pace_session(self.rate_limits.trace, self.pacer)
        super().__init__(
            intents=client_intents or intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            http_trace=self.rate_limits.trace,
            **self._shard_options(services),
        )

        self.account_id = account_id
        self.services = services
        self.tree = app_commands.CommandTree(self)
        self.account = AccountRuntime(
            account_id, self, services, managers, min_edit_interval=min_edit_interval
        )
        self.set_up = False
        """:meth:`setup_hook` has finished: a stop before that has nothing of this
        client's to drain, and may cancel its start (see :mod:`bot.app`)."""
        services.events.subscribe(self._on_event)  # once per account

    def _on_event(self, event: DomainEvent) -> None:
        """What the services tell this account: shown in its threads; after each turn
        of an agent and after a task's announcement, the brief button where it is due."""
        self.account.on_event(event)
        if isinstance(event, AgentStarted):
            watch_turns(self.account, event)
        elif isinstance(event, SubagentFinished):
            subagent_finished(self.account, event.record)

    async def setup_hook(self) -> None:
        """Register and sync the commands. Runs once, before the gateway connects."""
        for feature in self._features():
            commands = [feature] if isinstance(feature, app_commands.Group) else feature.commands()
            for command in commands:
                self.tree.add_command(command)
        setup_handoffs(self)
        setup_approvals(self)
        setup_schedules(self)
        self.tree.error(self._command_failed)
        # What a previous run left unfinished (once per process), before the gateway
        # connects and new work can arrive.
        await self.services.pick_up()
        await recover_presses(
            self.account,
            {"brief": recover_brief, "approval": recover_approval, "handoff": recover_handoff},
        )
        self.account.run_in_background(offer_missed_briefs(self.account))
        guilds = uses_of(self.account).discord.command_guild_ids
        if guilds:
            for guild_id in guilds:
                guild = discord.Object(guild_id)
                self.tree.copy_global_to(guild=guild)
                await self.tree.sync(guild=guild)
        else:
            await self.tree.sync()
        self.set_up = True

    def _features(self) -> list[app_commands.Group | _TopLevelCommands]:
        """The slash commands, one object per feature (``bot/commands/``): a group is
        one command with its subcommands; the others give their top-level commands."""
        account = self.account
        return [
            AgentsGroup(account),
            ConfigGroup(account),
            ScheduleGroup(account),
            SteeringCommands(account),
            TreeCommands(account),
            FocusCommands(account),
            SessionGroup(account),
            ArtifactsCommands(account),
            SessionModelCommands(account),
            HelpCommands(account),
        ]

    @staticmethod
    def _shard_options(services: Services) -> dict[str, Any]:
        """One gateway connection: discord.py's plain client takes no shard settings."""
        return {}

    @property
    def sharded(self) -> bool:
        return isinstance(self, discord.AutoShardedClient)

    async def on_connect(self) -> None:
        """A ``READY``: the gateway session is new, so events may have been missed. The
        bound threads are held before any message that follows it is handled (this
        handler's first step runs first); each guild's are caught up as it arrives."""
        if not self.sharded:
            self.account.catch_up.hold()

    async def on_shard_connect(self, shard_id: int) -> None:
        self.account.catch_up.hold(shard_id)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        """A guild's threads are known (at a ``READY``, or back from an outage): read back
        what its bound threads missed."""
        self.account.catch_up.start(guild_id=guild.id)

    async def on_ready(self) -> None:
        _log.info(
            "bot.ready",
            account=self.account_id,
            guilds=len(self.guilds),
            shards=self.services.shards.describe(),
            live_bindings=len(self.services.bindings),
        )
        if not self.sharded:  # what no guild brought (a guild that did not come back)
            self.account.catch_up.start(held_only=True)

    async def on_shard_ready(self, shard_id: int) -> None:
        self.account.catch_up.start(shard_id=shard_id, held_only=True)

    async def close(self) -> None:
        """Disconnect, ending discord.py's own wait for the guilds after a ``READY`` first.

        That wait (``_delay_ready``, up to ``guild_ready_timeout``) runs in a task of
        its own; left running past a close it dispatches ``ready`` on the closed
        client, fails, and asyncio logs "Task exception was never retrieved". It is
        ended before the close (no ``ready`` handler runs while the bot stops) and
        again after it (a ``READY`` parsed while the gateway was closing).
        """
        self._end_ready_waits()
        await super().close()
        self._end_ready_waits()

    def _end_ready_waits(self) -> None:
        state = self._connection
        waits = [getattr(state, "_ready_task", None)]  # discord.py's, not public
        waits += list(getattr(state, "_ready_tasks", {}).values())  # one per shard
        for task in waits:
            if isinstance(task, asyncio.Task) and not task.done():
                task.cancel()

    async def on_message(self, message: discord.Message) -> None:
        """A message in a bound thread goes to its agent, through the inbox; elsewhere a
        mention of the bot starts a session (:mod:`bot.mentions`); everything else is not
        ours. Nothing raises from here: the inbox and the mention answer every failure."""
        try:
            if not await self.account.inbox.on_message(message):
                await on_mention(self.account, self, message)
        except Exception:
            _log.error("bot.on_message_failed", message_id=message.id, exc_info=True)

    async def _command_failed(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """A command that raised: logged, and answered with a line saying so (never silence)."""
        _log.error(
            "bot.command_failed",
            command=interaction.command.qualified_name if interaction.command else None,
            exc_info=error,
        )
        text = "⚠️ This command failed inside the bot (the details are in its logs)."
        try:
            if interaction.response.is_done():
                await interaction.followup.send(text, ephemeral=True)
            else:
                await interaction.response.send_message(text, ephemeral=True)
        except (discord.HTTPException, RuntimeError):
            _log.warning("bot.command_answer_failed")

    async def on_raw_thread_delete(self, payload: discord.RawThreadDeleteEvent) -> None:
        """A deleted thread's binding ends now, not at the next send (never, if idle)."""
        await self.account.thread_deleted(payload.thread_id, payload.parent_id)


class ShardedThreadboundClient(ThreadboundClient, discord.AutoShardedClient):
    """The bot over discord.py's sharded client: ``[discord] shard_count`` shards in
    all, of which this process connects ``shard_ids`` (unset: every one). Discord
    sends each shard only its guilds' events, so processes splitting the shards
    never both see one event."""

    @staticmethod
    def _shard_options(services: Services) -> dict[str, Any]:
        shards = services.config.discord
        return {"shard_count": shards.shard_count, "shard_ids": shards.shard_ids}


def client_for(account_id: str, services: Services, managers: ManagerRegistry) -> ThreadboundClient:
    """The client for the configuration: sharded once ``[discord] shard_count`` is set."""
    if services.config.discord.shard_count is not None:
        return ShardedThreadboundClient(account_id, services, managers)
    return ThreadboundClient(account_id, services, managers)
