"""Runtime overrides: validated, persisted per scope, applied at once, audited."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS, parse_config
from core.errors import ConfigError
from core.overrides import RuntimeOverrides
from tests.fixtures.stores import StoreFactory

CONFIG = parse_config({"channels": {"discord": {"accounts": {"main": {}}}}}, env={})
ACCOUNT_FLAG = "channels.discord.accounts.main.threadBindings.spawnSubagentSessions"


async def overrides_on(open_store: StoreFactory) -> RuntimeOverrides:
    overrides = RuntimeOverrides(await open_store(), CONFIG)
    await overrides.start()
    return overrides


async def test_set_applies_at_once_and_survives_restart(open_store: StoreFactory) -> None:
    """An override changes the resolved flag now and after a restart, in its scope only."""
    overrides = await overrides_on(open_store)
    assert overrides.get("g1", FLAG_SPAWN_SUBAGENT_SESSIONS).value is False
    await overrides.set("g1", FLAG_SPAWN_SUBAGENT_SESSIONS, "on", actor="admin:1")
    flag = overrides.get("g1", FLAG_SPAWN_SUBAGENT_SESSIONS, account_id="main")
    assert (flag.value, flag.source, flag.overridden) == (True, FLAG_SPAWN_SUBAGENT_SESSIONS, True)
    assert overrides.get("g2", FLAG_SPAWN_SUBAGENT_SESSIONS).value is False

    restarted = await overrides_on(open_store)
    assert restarted.thread_bindings("g1", account_id="main").spawn_subagent_sessions is True
    assert restarted.thread_bindings("g2", account_id="main").spawn_subagent_sessions is False


async def test_change_is_audited(open_store: StoreFactory) -> None:
    """Each change logs config.changed with who, the old and the new value."""
    overrides = await overrides_on(open_store)
    with capture_logs() as logs:
        await overrides.set("g1", "session.threadBindings.idleHours", "2", actor="admin:1")
        await overrides.set("g1", "session.threadBindings.idleHours", 3, actor="admin:2")
        await overrides.reset("g1", "session.threadBindings.idleHours", actor="admin:1")
    changes = [
        (e["key"], e["old"], e["new"], e["actor"], e["scope"])
        for e in logs
        if e["event"] == "config.changed"
    ]
    assert changes == [
        ("session.threadBindings.idleHours", None, 2.0, "admin:1", "g1"),
        ("session.threadBindings.idleHours", 2.0, 3.0, "admin:2", "g1"),
        ("session.threadBindings.idleHours", 3.0, None, "admin:1", "g1"),
    ]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("store.url", "x", "an overridable flag path"),
        ("channels.discord.accounts.other.threadBindings.enabled", "on", "account id"),
        (ACCOUNT_FLAG, "maybe", "true/false"),
        ("session.threadBindings.idleHours", "-1", "hours >= 0"),
    ],
)
async def test_invalid_override_is_refused_and_not_stored(
    open_store: StoreFactory, path: str, value: str, message: str
) -> None:
    """A path that is not a flag, or a value of the wrong kind, is a clear error."""
    overrides = await overrides_on(open_store)
    with pytest.raises(ConfigError, match=message):
        await overrides.set("g1", path, value, actor="admin:1")
    assert dict(overrides.for_scope("g1")) == {}


async def test_reset_without_override(open_store: StoreFactory) -> None:
    """Resetting a key that has no override says so."""
    overrides = await overrides_on(open_store)
    with pytest.raises(ConfigError, match="none is set"):
        await overrides.reset("g1", ACCOUNT_FLAG, actor="admin:1")


async def test_an_account_the_config_does_not_name_reads_the_channel_level(
    open_store: StoreFactory,
) -> None:
    """One resolver maps unknown accounts itself: callers pass the account they have."""
    config = parse_config(
        {"channels": {"discord": {"accounts": {"main": {}}, "threadBindings": {"idleHours": 2}}}},
        env={},
    )
    overrides = RuntimeOverrides(await open_store(), config)
    await overrides.start()
    assert overrides.thread_bindings("g1", "not-configured").idle_hours == 2
    assert overrides.spawns_threads("g1", "not-configured") is False
    await overrides.set("g1", FLAG_SPAWN_SUBAGENT_SESSIONS, "on", actor="admin:1")
    assert overrides.spawns_threads("g1", "not-configured") is True


async def test_who_set_an_override_is_kept_and_survives_a_restart(
    open_store: StoreFactory,
) -> None:
    """origin() names the actor and scope of the override that applies, after a reload too."""
    overrides = await overrides_on(open_store)
    assert overrides.origin("g1", FLAG_SPAWN_SUBAGENT_SESSIONS) is None
    await overrides.set("*", FLAG_SPAWN_SUBAGENT_SESSIONS, "off", actor="op:9")
    everywhere = overrides.origin("g1", FLAG_SPAWN_SUBAGENT_SESSIONS)
    assert everywhere is not None
    assert (everywhere.scope, everywhere.actor) == ("*", "op:9")
    await overrides.set("g1", FLAG_SPAWN_SUBAGENT_SESSIONS, "on", actor="admin:1")

    restarted = await overrides_on(open_store)
    own = restarted.origin("g1", FLAG_SPAWN_SUBAGENT_SESSIONS)
    assert own is not None
    assert (own.scope, own.actor) == ("g1", "admin:1")
    assert own.at.tzinfo is not None
    await restarted.reset("g1", FLAG_SPAWN_SUBAGENT_SESSIONS, actor="admin:1")
    back = restarted.origin("g1", FLAG_SPAWN_SUBAGENT_SESSIONS)
    assert back is not None
    assert back.scope == "*"


async def test_the_gates_read_the_channel_they_are_asked_for(open_store: StoreFactory) -> None:
    """Spawning threads and scheduling on a Matrix account follow Matrix's flags, not
    Discord's, and the other way round."""
    matrix = {
        "accounts": {
            "default": {
                "homeserver": "http://127.0.0.1:8008",
                "user_id": "@threadbound:example.org",
                "access_token_env": "MATRIX_ACCESS_TOKEN",
            }
        },
        "threadBindings": {"spawnSubagentSessions": True, "scheduledTasks": False},
    }
    config = parse_config(
        {"channels": {"discord": {"accounts": {"main": {}}}, "matrix": matrix}},
        env={"MATRIX_ACCESS_TOKEN": "a-token-for-the-test"},
    )
    overrides = RuntimeOverrides(await open_store(), config)
    await overrides.start()
    assert overrides.spawns_threads("!room:example.org", "default", channel="matrix") is True
    assert overrides.schedules("!room:example.org", "default", channel="matrix") is False
    assert overrides.spawns_threads("g1", "main") is False  # Discord's defaults
    assert overrides.schedules("g1", "main", channel="discord") is True
