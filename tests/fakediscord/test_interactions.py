"""App commands and components with a real ``CommandTree`` and persistent views."""

from __future__ import annotations

import asyncio

import discord
import pytest
from discord import app_commands

from fakediscord import FakeDiscord
from tests.fakediscord.conftest import TOKEN, WAIT, Clients, World, intents


class Bot(discord.Client):
    """A client with an ``/agents spawn|list`` group and a ``/ping`` command."""

    def __init__(self, *, guild_id: int | None = None) -> None:
        super().__init__(intents=intents())
        self.tree = app_commands.CommandTree(self)
        self.guild_id = guild_id
        self.spawned: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.clicked: asyncio.Queue[int] = asyncio.Queue()
        agents = app_commands.Group(name="agents", description="Subagents")

        @agents.command(name="spawn", description="Spawn a subagent")
        @app_commands.choices(
            mode=[app_commands.Choice(name=m, value=m) for m in ("run", "session")]
        )
        async def spawn(interaction: discord.Interaction, task: str, mode: str = "run") -> None:
            self.spawned.put_nowait((task, mode))
            await interaction.response.send_message(f"spawning: {task}", view=Confirm(self.clicked))
            await interaction.followup.send("started", ephemeral=True)

        @agents.command(name="list", description="List subagents")
        async def list_(interaction: discord.Interaction) -> None:
            await interaction.response.defer(thinking=True)
            await interaction.edit_original_response(content="nothing running")

        @app_commands.command(name="whois", description="Describe a member")
        async def whois(interaction: discord.Interaction, member: discord.Member) -> None:
            await interaction.response.send_message(f"{member.name} {member.id}")

        @app_commands.command(name="pick", description="Pick a fruit")
        async def pick(interaction: discord.Interaction, kind: str, fruit: str) -> None:
            await interaction.response.send_message(f"{kind} {fruit}")

        @pick.autocomplete("fruit")
        async def fruits(
            interaction: discord.Interaction, current: str
        ) -> list[app_commands.Choice[str]]:
            kind = interaction.namespace.kind
            names = [f"{kind} {n}" for n in ("apple", "apricot", "banana") if n.startswith(current)]
            return [app_commands.Choice(name=n, value=n) for n in names]

        guild = discord.Object(id=guild_id) if guild_id else None
        self.tree.add_command(agents, guild=guild)
        self.tree.add_command(whois, guild=guild)
        self.tree.add_command(pick, guild=guild)

    async def setup_hook(self) -> None:
        self.add_view(Confirm(self.clicked))
        guild = discord.Object(id=self.guild_id) if self.guild_id else None
        await self.tree.sync(guild=guild)


class Confirm(discord.ui.View):
    """A persistent view: survives restarts because its button has a fixed custom_id."""

    def __init__(self, clicked: asyncio.Queue[int] | None = None) -> None:
        super().__init__(timeout=None)
        self.clicked = clicked

    @discord.ui.button(label="Confirm", custom_id="artifact:confirm")
    async def confirm(
        self, interaction: discord.Interaction, _: discord.ui.Button[Confirm]
    ) -> None:
        if self.clicked is not None:
            self.clicked.put_nowait(interaction.user.id)
        await interaction.response.edit_message(content="confirmed", view=None)


class TestCommands:
    async def test_tree_sync_registers_global_commands(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """``tree.sync()`` is a PUT of the definitions, recorded and registered."""
        await clients.start(Bot(), TOKEN)

        put = fake.requests_matching("PUT", f"/applications/{world.bot.id}/commands")[0]
        assert put.token == TOKEN
        assert [c["name"] for c in put.json] == ["agents", "whois", "pick"]
        registered = [(c.name, c.guild_id) for c in fake.state.commands.values()]
        assert registered == [("agents", None), ("whois", None), ("pick", None)]

    async def test_invoke_runs_the_handler_and_records_response_and_followup(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """``/agents spawn`` reaches the handler; its reply and followup are recorded."""
        bot = await clients.start(Bot(guild_id=world.guild.id), TOKEN)

        handle = await fake.invoke_command(
            world.guild,
            world.channel.id,
            world.alice,
            "agents spawn",
            options={"task": "summarise", "mode": "session"},
        )

        async with asyncio.timeout(WAIT):
            assert await bot.spawned.get() == ("summarise", "session")
        callback = await handle.wait_response()
        assert callback.callback_type == 4
        assert callback.body["data"]["content"] == "spawning: summarise"
        followup = (await handle.wait_followups(1))[0]
        assert followup.body["content"] == "started"
        original = handle.original_message
        assert original is not None
        assert original.content == "spawning: summarise"
        assert original.interaction_id == handle.id
        assert [m.id for m in fake.messages_in(world.channel)] == [original.id]

    async def test_user_options_arrive_resolved_as_members(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A user argument is sent with ``resolved`` data, so the handler gets a Member."""
        await clients.start(Bot(), TOKEN)

        handle = await fake.invoke_command(
            world.guild, world.channel, world.alice, "whois", {"member": world.admin}
        )

        response = await handle.wait_response()
        assert response.body["data"]["content"] == f"root {world.admin.id}"

    async def test_defer_then_edit_original(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A thinking defer creates a loading message that the edit fills in."""
        await clients.start(Bot(), TOKEN)

        handle = await fake.invoke_command(world.guild, world.channel, world.alice, "agents list")
        await handle.wait_for(lambda i: any(r.kind == "edit_original" for r in i.responses))

        assert [r.kind for r in handle.responses] == ["callback", "edit_original"]
        assert handle.callback is not None
        assert handle.callback.callback_type == 5
        original = handle.original_message
        assert original is not None
        assert (original.content, original.flags & 128) == ("nothing running", 0)

    async def test_autocomplete_asks_the_bot_for_choices(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Typing in an autocompleted option sends what was typed; the bot answers with type 8."""
        await clients.start(Bot(), TOKEN)

        handle = await fake.autocomplete(
            world.guild,
            world.channel,
            world.alice,
            "pick",
            {"kind": "ripe", "fruit": "ap"},
            focused="fruit",
        )

        response = await handle.wait_response()
        assert response.callback_type == 8
        assert [c["value"] for c in response.body["data"]["choices"]] == [
            "ripe apple",
            "ripe apricot",
        ]
        assert fake.messages_in(world.channel) == []  # choices are no message
        with pytest.raises(ValueError, match="no autocomplete"):
            await fake.autocomplete(
                world.guild, world.channel, world.alice, "pick", {}, focused="kind"
            )

    async def test_invalid_invocations_fail_in_the_test(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Unknown commands, options or choices raise before anything is sent."""
        await clients.start(Bot(), TOKEN)

        with pytest.raises(LookupError, match="no command /nope"):
            await fake.invoke_command(world.guild, world.channel, world.alice, "nope")
        with pytest.raises(ValueError, match="requires"):
            await fake.invoke_command(world.guild, world.channel, world.alice, "agents spawn")
        with pytest.raises(ValueError, match="not a choice"):
            await fake.invoke_command(
                world.guild, world.channel, world.alice, "agents spawn", {"task": "t", "mode": "x"}
            )


class TestComponents:
    async def test_button_click_reaches_the_view_sent_with_the_reply(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Clicking a custom_id button calls the view; its update edits the message."""
        bot = await clients.start(Bot(), TOKEN)
        handle = await fake.invoke_command(
            world.guild, world.channel, world.alice, "agents spawn", {"task": "t"}
        )
        await handle.wait_response()
        message = handle.original_message
        assert message is not None

        click = await fake.click_button(message.id, "artifact:confirm", world.admin)

        async with asyncio.timeout(WAIT):
            assert await bot.clicked.get() == world.admin.id
        response = await click.wait_response()
        assert response.callback_type == 7
        assert fake.message(message.id).content == "confirmed"
        assert fake.message(message.id).components == []

    async def test_button_on_a_message_from_before_a_restart_reaches_the_persistent_view(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A message the bot posted earlier (no view in memory) is handled by ``add_view``."""
        button = {"type": 2, "style": 1, "label": "Confirm", "custom_id": "artifact:confirm"}
        earlier = fake.ops.post_message(
            world.channel.id,
            world.bot.id,
            {"content": "confirm?", "components": [{"type": 1, "components": [button]}]},
        )
        bot = await clients.start(Bot(), TOKEN)

        click = await fake.click_button(earlier.id, "artifact:confirm", world.alice)

        async with asyncio.timeout(WAIT):
            assert await bot.clicked.get() == world.alice.id
        assert (await click.wait_response()).callback_type == 7
        assert fake.message(earlier.id).content == "confirmed"
