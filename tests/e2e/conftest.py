"""End-to-end fixtures: the real bot client against the fake Discord."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.account import AccountRuntime
from adapters.discord.manager import ManagerRegistry
from bot.client import ThreadboundClient
from bot.wiring import Services, build_services
from core.clock import FakeClock
from core.config import parse_config
from core.providers.scripted import ScriptedProvider, Step
from fakediscord import FakeDiscord
from tests.fakediscord.conftest import TOKEN, Clients, World, clients, fake, world

__all__ = ["TOKEN", "Bot", "Clients", "World", "clients", "fake", "world"]


@dataclass
class Bot:
    client: ThreadboundClient
    services: Services
    provider: ScriptedProvider
    clock: FakeClock
    fake: FakeDiscord
    world: World

    def binding(self):
        (record,) = self.services.bindings.live()
        return record


StartBot = Callable[..., Any]


@pytest.fixture
async def start_bot(
    fake: FakeDiscord, clients: Clients, world: World, tmp_path: Path
) -> AsyncIterator[StartBot]:
    """Start the bot with a scripted model; flags and steps per test."""
    started: list[Services] = []

    async def start(
        steps: Sequence[Step] | Callable[..., Step] = (),
        *,
        spawn_threads: bool = True,
        db_name: str = "bot.db",
        agents: dict[str, Any] | None = None,
        extra_commands: Callable[[AccountRuntime], list[Any]] | None = None,
        subagent_timeout: float = 0,
        min_edit_interval: float = 0,
        discord_settings: dict[str, Any] | None = None,
        agent_settings: dict[str, Any] | None = None,
        mcp_servers: dict[str, Any] | None = None,
        providers: dict[str, Any] | None = None,
        acp_agents: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        scheduler: dict[str, Any] | None = None,
    ) -> Bot:
        config = parse_config(
            {
                "store": {"url": f"sqlite:///{tmp_path / db_name}"},
                "channels": {
                    "discord": {"threadBindings": {"spawnSubagentSessions": spawn_threads}}
                },
                "discord": {
                    "command_guild_ids": [world.guild.id],
                    **(discord_settings or {}),
                },
                "agents": agents or {},
                # 0: no timeout sleeper on the fake clock unless a test asks for one
                "agent": {"subagent_timeout_seconds": subagent_timeout, **(agent_settings or {})},
                "mcp_servers": mcp_servers or {},
                "providers": providers or {},
                "acp_agents": acp_agents or {},
                "scheduler": scheduler or {},
            },
            config_path=tmp_path / "config.toml",
            env=env or {},
        )
        clock = FakeClock()
        provider = ScriptedProvider(steps if callable(steps) else list(steps))
        services = await build_services(config, clock=clock, env=env or {}, provider=provider)
        started.append(services)
        client = ThreadboundClient(
            "default", services, ManagerRegistry(), min_edit_interval=min_edit_interval
        )
        if extra_commands is not None:  # commands the client does not register yet
            for command in extra_commands(client.account):
                client.tree.add_command(command)
        await clients.start(client, TOKEN)
        return Bot(client, services, provider, clock, fake, world)

    yield start
    for services in started:
        await services.close()
