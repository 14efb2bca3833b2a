"""``/config``, ``/focus``, ``/unfocus`` and ``/session`` over the fake Discord."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from structlog.testing import capture_logs

from bot.commands.config import ADMINS_ONLY, EXAMPLE, OPERATORS_ONLY
from bot.commands.focus import NOT_OWNER
from core.bindings.repository import BindingRepository
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS
from core.overrides import EVERY_SERVER
from core.providers.scripted import Step
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, bound_thread, content, ephemeral, run, settle, spawn
from tests.fakediscord.conftest import World

SPAWN_PATH = FLAG_SPAWN_SUBAGENT_SESSIONS
FROM_THE_CHANNEL = (
    "from the config file's `[channels.discord.threadBindings]` (the channel level, "
    "for every account)"
)
HOUR_MS = 3_600_000


async def choices(
    bot: Bot, command: str, focused: str, *, user: Any = None, **typed: str
) -> list[tuple[str, str]]:
    """What Discord's client offers while the admin (or ``user``) types in ``focused``."""
    handle = await bot.fake.autocomplete(
        bot.world.guild,
        bot.world.channel.id,
        user or bot.world.admin,
        command,
        typed,
        focused=focused,
    )
    async with asyncio.timeout(TIMEOUT):
        response = await handle.wait_response()
    assert response.callback_type == 8
    return [(c["name"], c["value"]) for c in response.body["data"]["choices"]]


class TestConfig:
    async def test_non_admin_is_refused_and_nothing_is_stored(self, start_bot: StartBot) -> None:
        """A plain member's /config set is refused ephemerally; no override exists afterwards."""
        bot = await start_bot(spawn_threads=False)
        reply = await run(bot, bot.world.alice, "config set", key=SPAWN_PATH, value="on")
        assert content(reply) == ADMINS_ONLY
        assert ephemeral(reply)
        assert bot.services.overrides.for_scope(str(bot.world.guild.id)) == {}

    async def test_admin_set_applies_at_once_and_is_audited(self, start_bot: StartBot) -> None:
        """An admin turns spawnSubagentSessions on; the next session spawn opens a thread."""
        bot = await start_bot([Step(text="hi")], spawn_threads=False)
        with capture_logs() as logs:
            reply = await run(bot, bot.world.admin, "config set", key=SPAWN_PATH, value="on")
        assert "set to `on`" in content(reply)
        (changed,) = [e for e in logs if e["event"] == "config.changed"]
        assert changed | {"key": SPAWN_PATH, "old": None, "new": True} == changed
        assert changed["actor"] == str(bot.world.admin.id)
        assert changed["scope"] == str(bot.world.guild.id)

        (spawned,) = await spawn(bot, "stay with me", mode="session")
        record = bot.binding()
        assert f"<#{record.conversation.conversation_id}>" in spawned.body["content"]

    async def test_binding_windows_set_by_an_admin_reach_new_bindings(
        self, start_bot: StartBot
    ) -> None:
        """/config set idleHours and maxAgeHours change the windows of the next thread bound."""
        bot = await start_bot([Step(text="hi")])
        base = "channels.discord.threadBindings"
        await run(bot, bot.world.admin, "config set", key=f"{base}.idleHours", value="3")
        await run(bot, bot.world.admin, "config set", key=f"{base}.maxAgeHours", value="5")
        await spawn(bot, "stay with me", mode="session")
        record = bot.binding()
        assert record.idle_timeout_ms == 3 * HOUR_MS
        assert record.expires_at == record.bound_at + timedelta(hours=5)
        await settle(bot, record.target_session_key)

    async def test_get_shows_source_and_reset_restores_the_file_value(
        self, start_bot: StartBot
    ) -> None:
        """get names the deciding level and marks overrides; reset removes the override."""
        bot = await start_bot(spawn_threads=False)
        admin = bot.world.admin
        before = await run(bot, admin, "config get", key=SPAWN_PATH)
        assert content(before) == f"`{SPAWN_PATH}` = `off`, {FROM_THE_CHANNEL}"
        await run(bot, admin, "config set", key=SPAWN_PATH, value="on")
        after = await run(bot, admin, "config get", key=SPAWN_PATH)
        assert content(after).startswith(
            f"`{SPAWN_PATH}` = `on`, from a runtime override by <@{admin.id}> in this server on "
        )

        with capture_logs() as logs:
            reset = await run(bot, admin, "config reset", key=SPAWN_PATH)
        assert "now `off`" in content(reset)
        assert bot.services.overrides.for_scope(str(bot.world.guild.id)) == {}
        assert [e["new"] for e in logs if e["event"] == "config.changed"] == [None]
        again = await run(bot, admin, "config reset", key=SPAWN_PATH)
        assert ephemeral(again)
        assert "none is set" in content(again)

    async def test_a_server_admin_cannot_change_every_server(self, start_bot: StartBot) -> None:
        """everywhere:True reaches servers whose admins did not ask: operators only."""
        bot = await start_bot(spawn_threads=True)
        reply = await run(
            bot, bot.world.admin, "config set", key=SPAWN_PATH, value="off", everywhere=True
        )
        assert content(reply) == OPERATORS_ONLY
        assert ephemeral(reply)
        assert bot.services.overrides.own(EVERY_SERVER) == {}

    async def test_an_operator_changes_every_server_and_a_server_override_still_wins(
        self, start_bot: StartBot, world: World
    ) -> None:
        """An every-server override applies where a server has none of its own; reset undoes it."""
        bot = await start_bot(
            spawn_threads=True, discord_settings={"operator_ids": [world.admin.id]}
        )
        admin = bot.world.admin
        reply = await run(bot, admin, "config set", key=SPAWN_PATH, value="off", everywhere=True)
        assert "for every server" in content(reply)
        guild = str(bot.world.guild.id)
        assert not bot.services.overrides.spawns_threads(guild)
        assert not bot.services.overrides.spawns_threads("123456789")  # any other server

        await run(bot, admin, "config set", key=SPAWN_PATH, value="on")
        assert bot.services.overrides.spawns_threads(guild)  # this server's own wins here
        assert not bot.services.overrides.spawns_threads("123456789")

        reset = await run(bot, admin, "config reset", key=SPAWN_PATH, everywhere=True)
        assert "removed" in content(reset)
        assert bot.services.overrides.own(EVERY_SERVER) == {}

    async def test_get_names_the_level_and_who_overrode_it(
        self, start_bot: StartBot, world: World
    ) -> None:
        """The default, an account's table and an every-server override each say so."""
        bot = await start_bot(
            discord_settings={"operator_ids": [world.admin.id]},
        )
        admin = bot.world.admin
        idle = await run(bot, admin, "config get", key="session.threadBindings.maxAgeHours")
        assert content(idle) == (
            "`session.threadBindings.maxAgeHours` = `0.0`, the built-in default "
            "(neither the config file nor an override sets it)"
        )
        await run(bot, admin, "config set", key=SPAWN_PATH, value="off", everywhere=True)
        reply = await run(bot, admin, "config get", key=SPAWN_PATH)
        assert f"from a runtime override by <@{admin.id}> for every server on " in content(reply)
        assert f"stored at `{SPAWN_PATH}`" in content(reply)

    async def test_an_empty_key_asks_for_a_flag(self, start_bot: StartBot) -> None:
        """A blank key is a question back with a working example, never "`` is not a flag"."""
        bot = await start_bot()
        for command, extra, blank in (
            ("config set", {"value": "on"}, ""),
            ("config get", {}, " "),
        ):
            reply = await run(bot, bot.world.admin, command, key=blank, **extra)
            assert ephemeral(reply)
            text = content(reply)
            assert text.startswith("Which flag? Give `key` a flag's name, e.g. ")
            assert f"`/{command} key:spawnSubagentSessions" in text
            assert "``" not in text
        assert bot.services.overrides.for_scope(str(bot.world.guild.id)) == {}

    async def test_bad_key_or_value_is_explained(self, start_bot: StartBot) -> None:
        """An unknown path or a value of the wrong type comes back as the ConfigError's message."""
        bot = await start_bot()
        unknown = await run(bot, bot.world.admin, "config get", key="nope.enabled")
        assert ephemeral(unknown)
        assert "nope.enabled" in content(unknown)
        bad = await run(bot, bot.world.admin, "config set", key=SPAWN_PATH, value="maybe")
        assert ephemeral(bad)
        assert SPAWN_PATH in content(bad)
        assert bot.services.overrides.for_scope(str(bot.world.guild.id)) == {}

    async def test_the_readme_names_work_as_keys(self, start_bot: StartBot) -> None:
        """A flag's name, or any unambiguous end of its path, is the flag; so is the example."""
        bot = await start_bot(spawn_threads=False)
        admin = bot.world.admin
        reply = await run(bot, admin, "config get", key="spawnSubagentSessions")
        assert content(reply) == f"`{SPAWN_PATH}` = `off`, {FROM_THE_CHANNEL}"
        example = dict(word.split(":", 1) for word in EXAMPLE.split()[2:])
        reply = await run(bot, admin, "config set", **example)
        assert content(reply) == f"`{SPAWN_PATH}` set to `on` (was `off`) in this server."
        assert bot.services.overrides.spawns_threads(str(bot.world.guild.id))
        reply = await run(bot, admin, "config reset", key="threadBindings.spawnSubagentSessions")
        assert "removed in this server; now `off`" in content(reply)
        reply = await run(bot, admin, "config get", key="discord.threadBindings.idleHours")
        assert content(reply).startswith("`channels.discord.threadBindings.idleHours` = `24.0`")

    async def test_an_ambiguous_key_lists_the_clear_ones(self, start_bot: StartBot) -> None:
        """``enabled`` is a flag of [session] and of the channel: both keys are offered."""
        bot = await start_bot()
        reply = await run(bot, bot.world.admin, "config set", key="enabled", value="off")
        assert ephemeral(reply)
        assert content(reply) == (
            "`enabled` could be any of these flags: `session.threadBindings.enabled`, "
            "`discord.threadBindings.enabled`. Use one of those keys."
        )
        assert bot.services.overrides.for_scope(str(bot.world.guild.id)) == {}

    async def test_a_mistyped_key_is_answered_in_a_few_words(self, start_bot: StartBot) -> None:
        """No config-file error: the nearest flag, the flag names and a working example."""
        bot = await start_bot()
        reply = await run(bot, bot.world.admin, "config get", key="spawnSubagentSesions")
        text = content(reply)
        assert "<runtime>" not in text
        assert "\n" not in text
        assert "Did you mean `spawnSubagentSessions`?" in text
        assert f"`{EXAMPLE}`" in text
        bad = await run(bot, bot.world.admin, "config set", key="idleHours", value="soon")
        assert content(bad) == (
            "`idleHours` could be any of these flags: `session.threadBindings.idleHours`, "
            "`discord.threadBindings.idleHours`. Use one of those keys."
        )
        bad = await run(
            bot, bot.world.admin, "config set", key="spawnSubagentSessions", value="maybe"
        )
        assert content(bad) == (
            f"`{SPAWN_PATH}` was not changed: it takes true/false, on/off or yes/no (got 'maybe')."
        )

    async def test_key_and_value_are_autocompleted(self, start_bot: StartBot) -> None:
        """Typing a key offers the flag paths with their value here; the value, what fits."""
        bot = await start_bot(spawn_threads=False)
        offered = await choices(bot, "config get", "key", key="spawn")
        assert offered == [
            (f"{SPAWN_PATH} = off", SPAWN_PATH),
            (
                "channels.discord.accounts.default.threadBindings.spawnSubagentSessions = off",
                "channels.discord.accounts.default.threadBindings.spawnSubagentSessions",
            ),
        ]
        every = await choices(bot, "config set", "key", key="")
        assert len(every) == 13  # 3 [session] flags, 5 channel flags, 5 of the account
        assert await choices(bot, "config set", "value", key="spawnSubagentSessions") == [
            ("on", "on"),
            ("off", "off"),
        ]
        hours = await choices(
            bot,
            "config set",
            "value",
            key=SPAWN_PATH.replace("spawnSubagentSessions", "idleHours"),
            value="1",
        )
        assert hours == [("1 hour", "1"), ("168 hours (a week)", "168")]
        assert await choices(bot, "config set", "value", key="nope", value="") == []
        alice = bot.world.alice  # not an administrator: nothing offered, values included
        assert await choices(bot, "config get", "key", user=alice, key="") == []
        assert await choices(bot, "config set", "value", user=alice, key=SPAWN_PATH) == []

    async def test_group_is_hidden_from_non_admins_by_default(self, start_bot: StartBot) -> None:
        """The registered /config command carries Administrator as its default permission."""
        bot = await start_bot()
        group = bot.client.tree.get_command("config", guild=None)
        assert group is not None
        assert group.default_permissions is not None
        assert group.default_permissions.administrator


class TestFocus:
    async def test_focus_binds_an_existing_session_to_this_thread(
        self, start_bot: StartBot
    ) -> None:
        """/focus in another thread binds it to the session, owned by the invoking user."""
        bot = await start_bot([Step(text="hi")])
        record, _ = await bound_thread(bot)
        other = bot.fake.add_thread(bot.world.channel, "elsewhere", owner=bot.world.alice)
        await bot.fake.sync(bot.world.bot)
        reply = await run(bot, bot.world.alice, "focus", other.id, target=record.target_session_key)
        assert record.target_session_key in content(reply)
        (focused,) = [
            r
            for r in bot.services.bindings.list_by_session(record.target_session_key)
            if r.conversation.conversation_id == str(other.id)
        ]
        assert focused.target_kind == "session"
        assert focused.bound_by == str(bot.world.alice.id)
        assert focused.conversation.parent_conversation_id == str(bot.world.channel.id)
        assert focused.scope == str(bot.world.guild.id)

    async def test_unknown_target_or_bound_thread_is_refused(self, start_bot: StartBot) -> None:
        """An unknown session, or a thread already bound, is an ephemeral error; nothing binds."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        other = bot.fake.add_thread(bot.world.channel, "elsewhere")
        await bot.fake.sync(bot.world.bot)
        unknown = await run(bot, bot.world.alice, "focus", other.id, target="subagent:nope")
        assert ephemeral(unknown)
        assert "subagent:nope" in content(unknown)
        taken = await run(bot, bot.world.alice, "focus", thread, target=record.target_session_key)
        assert "already bound" in content(taken)
        assert list(bot.services.bindings.live()) == [record]

    async def test_focus_outside_a_thread_is_refused(self, start_bot: StartBot) -> None:
        """/focus in a plain channel says to use it in a thread."""
        bot = await start_bot()
        reply = await run(bot, bot.world.alice, "focus", target="anything")
        assert ephemeral(reply)
        assert "inside the thread" in content(reply)


class TestUnfocusAndWindows:
    async def test_unfocus_by_someone_else_is_refused(self, start_bot: StartBot) -> None:
        """A member who did not bind the thread cannot unfocus it."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        mallory = bot.fake.add_member(bot.world.guild, "mallory")
        reply = await run(bot, mallory, "unfocus", thread)
        assert (content(reply), ephemeral(reply)) == (NOT_OWNER, True)
        assert bot.services.bindings.get(record.binding_id) is not None

    async def test_unfocus_by_the_owner_ends_the_binding(self, start_bot: StartBot) -> None:
        """The user who bound the thread unfocuses it; the farewell is posted in the thread."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        reply = await run(bot, bot.world.alice, "unfocus", thread)
        assert record.target_session_key in content(reply)
        assert bot.services.bindings.get(record.binding_id) is None
        farewell = await bot.fake.wait_for_message(thread, lambda m: "no longer bound" in m.content)
        assert farewell.author_id == bot.world.bot.id

    async def test_admin_may_unfocus_any_thread(self, start_bot: StartBot) -> None:
        """An administrator can unfocus a thread someone else bound."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        await run(bot, bot.world.admin, "unfocus", thread)
        assert bot.services.bindings.get(record.binding_id) is None

    async def test_session_idle_by_the_owner_changes_and_persists(
        self, start_bot: StartBot
    ) -> None:
        """/session idle 2h sets the binding's idle timeout in memory and in the store."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        reply = await run(bot, bot.world.alice, "session idle", thread, duration="2h")
        assert "2h" in content(reply)
        assert bot.binding().idle_timeout_ms == 2 * HOUR_MS
        stored = await bot.services.database.run(
            lambda conn: BindingRepository(conn).get(record.binding_id)
        )
        assert stored.idle_timeout_ms == 2 * HOUR_MS

    async def test_session_max_age_and_refusals(self, start_bot: StartBot) -> None:
        """max-age sets the hard deadline; a stranger or a bad duration is refused."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        mallory = bot.fake.add_member(bot.world.guild, "mallory")
        refused = await run(bot, mallory, "session max-age", thread, duration="1h")
        assert content(refused) == NOT_OWNER
        bad = await run(bot, bot.world.alice, "session max-age", thread, duration="soon")
        assert ephemeral(bad)
        assert "invalid duration" in content(bad)
        assert bot.binding() == record

        await run(bot, bot.world.alice, "session max-age", thread, duration="1h30m")
        assert bot.binding().expires_at == record.bound_at + timedelta(hours=1, minutes=30)
        assert bot.binding().max_age_ms == HOUR_MS + HOUR_MS // 2
