"""Tests for core.config: loading, error messages, secrets and flag precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import (
    FLAG_SPAWN_SUBAGENT_SESSIONS,
    STORE_SCHEMES,
    Config,
    FlagValue,
    find_flag_path,
    load_config,
    overridable_paths,
    parse_config,
    resolve_flag,
    resolve_thread_bindings,
    shortest_flag_key,
    toml_key_path,
    validate_override,
)
from core.errors import ConfigError, got
from core.store.engine import SUPPORTED_DRIVERS

ROOT = Path(__file__).resolve().parents[2]
SECRET = "MTIzNDU2Nzg5.Gx7abc.super-secret-token-value"

TWO_ACCOUNTS = """
[session.threadBindings]
idleHours = 12

[channels.discord.threadBindings]
maxAgeHours = 48

[channels.discord.accounts.main.threadBindings]
idleHours = 2
spawnSubagentSessions = true

[channels.discord.accounts.other]
token_env = "OTHER_BOT_TOKEN"
"""


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    """Write a config file into tmp_path and return its path."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    """Load a config from TOML text with an empty (or given) environment."""
    return load_config(write(tmp_path, text), env=env or {})


def load_text_dict(data: dict[str, object]) -> Config:
    """Build a config from a dict with an empty environment."""
    return parse_config(data, env={})


def error_for(tmp_path: Path, text: str) -> ConfigError:
    """Load TOML text that must fail and return the ConfigError."""
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    return info.value


class TestDefaults:
    def test_no_file_gives_builtin_defaults(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        """Without a path and without ./config.toml the built-in defaults apply, based at cwd."""
        monkeypatch.chdir(tmp_path)
        config = load_config(env={})
        assert config.config_path is None
        assert config.base_dir == tmp_path
        assert config.account_ids() == ("default",)
        assert config.token_env("default") == "DISCORD_TOKEN"
        assert config.store.url == "sqlite:///threadbound.db"
        assert config.store.busy_timeout_ms == 5000
        assert config.bindings.touch_flush_seconds == 5.0
        assert config.bindings.sweep_interval_seconds == 60.0
        assert (config.logging.level, config.logging.console) == ("info", True)
        settings = resolve_thread_bindings(config)
        assert (settings.enabled, settings.idle_hours, settings.max_age_hours) == (True, 24.0, 0.0)
        assert settings.spawn_subagent_sessions is False

    def test_config_toml_in_cwd_is_read(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        """Without a path, ./config.toml is loaded when it exists."""
        write(tmp_path, "[logging]\nlevel = 'debug'\n")
        monkeypatch.chdir(tmp_path)
        config = load_config(env={})
        assert config.logging.level == "debug"
        assert config.config_path == tmp_path / "config.toml"

    def test_empty_file_equals_defaults(self, tmp_path: Path):
        """An empty file validates to the same values as no file at all."""
        assert load_text(tmp_path, "").model_dump() == parse_config({}, env={}).model_dump()


class TestExampleFile:
    def test_example_loads_without_env(self):
        """config.example.toml loads with no environment variables set."""
        config = load_config(ROOT / "config.example.toml", env={})
        assert config.account_ids() == ("default",)
        assert config.account_token("default") is None

    def test_example_matches_defaults(self):
        """The example shows the defaults: same tables, same resolved flags, same token variable."""
        example = load_config(ROOT / "config.example.toml", env={})
        defaults = parse_config({}, env={})
        assert example.model_dump(exclude={"channels"}) == defaults.model_dump(exclude={"channels"})
        assert resolve_thread_bindings(example) == resolve_thread_bindings(defaults)
        assert resolve_thread_bindings(example, account_id="default") == resolve_thread_bindings(
            defaults, account_id="default"
        )
        assert example.token_env("default") == defaults.token_env("default")

    def test_example_shows_every_key(self):
        """Every key of the schema appears in the example, commented out or not."""
        text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
        keys = ["enabled", "idleHours", "maxAgeHours", "spawnSubagentSessions", "token_env"]
        keys += ["url", "busy_timeout_ms", "touch_flush_seconds", "sweep_interval_seconds"]
        keys += ["level", "json_file", "console"]
        assert [key for key in keys if f"{key} =" not in text] == []


class TestFlagPrecedence:
    def test_builtin_default(self):
        """With nothing configured a flag comes from the built-in default."""
        config = parse_config({}, env={})
        assert resolve_flag(config, "idleHours") == FlagValue(value=24.0, source="default")

    def test_session_level(self, tmp_path: Path):
        """A [session.threadBindings] value beats the built-in default."""
        config = load_text(tmp_path, "[session.threadBindings]\nidleHours = 12\n")
        flag = resolve_flag(config, "idleHours", account_id="default")
        assert flag == FlagValue(value=12.0, source="session.threadBindings.idleHours")

    def test_channel_beats_session(self, tmp_path: Path):
        """A channel value beats the session value for the same flag."""
        text = "[session.threadBindings]\nenabled = true\n[channels.discord.threadBindings]\n"
        config = load_text(tmp_path, text + "enabled = false\n")
        flag = resolve_flag(config, "enabled")
        assert flag == FlagValue(value=False, source="channels.discord.threadBindings.enabled")

    def test_account_beats_channel(self, tmp_path: Path):
        """An account value beats the channel and session values."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        flag = resolve_flag(config, "idleHours", account_id="main")
        assert flag.value == 2.0
        assert flag.source == "channels.discord.accounts.main.threadBindings.idleHours"

    def test_unset_account_key_inherits_channel(self, tmp_path: Path):
        """An account that does not set a key inherits the channel's value."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        flag = resolve_flag(config, "maxAgeHours", account_id="main")
        assert flag == FlagValue(value=48.0, source="channels.discord.threadBindings.maxAgeHours")

    def test_spawn_subagent_sessions_defaults_false(self):
        """spawnSubagentSessions is off by default and has no session level."""
        config = parse_config({}, env={})
        assert resolve_flag(config, "spawnSubagentSessions").value is False
        assert "session.threadBindings.spawnSubagentSessions" not in overridable_paths(config)

    def test_spawn_flag_constant_is_its_channel_path(self):
        """The constant FeatureDisabled errors name is the channel-level TOML path."""
        config = load_text_dict({"channels": {"discord": {"threadBindings": {}}}})
        flag = resolve_flag(
            config, "spawnSubagentSessions", overrides={FLAG_SPAWN_SUBAGENT_SESSIONS: True}
        )
        assert flag.source == FLAG_SPAWN_SUBAGENT_SESSIONS

    def test_python_spelling_accepted(self, tmp_path: Path):
        """resolve_flag accepts the snake_case attribute name as well as the TOML key."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        flag = resolve_flag(config, "spawn_subagent_sessions", account_id="main")
        assert flag.value is True

    def test_resolve_thread_bindings_in_milliseconds(self, tmp_path: Path):
        """Resolved settings convert hours to the milliseconds binding records store."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        settings = resolve_thread_bindings(config, account_id="main")
        assert (settings.idle_timeout_ms, settings.max_age_ms) == (7_200_000, 172_800_000)
        assert settings.spawn_subagent_sessions is True

    def test_zero_hours_means_never(self, tmp_path: Path):
        """idleHours = 0 resolves to a 0 ms timeout, which means never expire."""
        config = load_text(tmp_path, "[session.threadBindings]\nidleHours = 0\n")
        assert resolve_thread_bindings(config).idle_timeout_ms == 0


class TestAccountIsolation:
    def test_account_setting_does_not_leak(self, tmp_path: Path):
        """Account main's settings do not affect account other."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        other = resolve_thread_bindings(config, account_id="other")
        assert (other.idle_hours, other.spawn_subagent_sessions) == (12.0, False)

    def test_account_override_does_not_leak(self, tmp_path: Path):
        """A runtime override for account main is ignored when resolving account other."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        overrides = {"channels.discord.accounts.main.threadBindings.enabled": False}
        assert (
            resolve_flag(config, "enabled", account_id="other", overrides=overrides).value is True
        )
        assert (
            resolve_flag(config, "enabled", account_id="main", overrides=overrides).value is False
        )

    def test_unknown_account_is_an_error(self, tmp_path: Path):
        """Resolving for an account the file does not define raises, naming the known ids."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError) as info:
            resolve_flag(config, "enabled", account_id="ghost")
        assert str(info.value) == (
            "<runtime>: channels.discord.accounts.ghost: expected a configured account id "
            "(main, other) (no such account)"
        )


class TestRuntimeOverrides:
    def test_session_override_beats_account_config(self, tmp_path: Path):
        """An override at the session path beats an account's value in the file."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        overrides = {"session.threadBindings.idleHours": 6}
        flag = resolve_flag(config, "idleHours", account_id="main", overrides=overrides)
        assert flag == FlagValue(
            value=6.0, source="session.threadBindings.idleHours", overridden=True
        )

    def test_channel_override_beats_account_config(self, tmp_path: Path):
        """An override at the channel path beats an account's value in the file."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        path = "channels.discord.threadBindings.spawnSubagentSessions"
        flag = resolve_flag(
            config, "spawnSubagentSessions", account_id="main", overrides={path: "off"}
        )
        assert (flag.value, flag.source, flag.overridden) == (False, path, True)

    def test_account_override(self, tmp_path: Path):
        """An override at the account path beats the account's own file value."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        path = "channels.discord.accounts.main.threadBindings.idleHours"
        flag = resolve_flag(config, "idleHours", account_id="main", overrides={path: "0.5"})
        assert (flag.value, flag.source) == (0.5, path)

    def test_more_specific_override_wins(self, tmp_path: Path):
        """Among overrides, account beats channel beats session."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        overrides: dict[str, object] = {
            "session.threadBindings.idleHours": 1,
            "channels.discord.threadBindings.idleHours": 3,
        }
        flag = resolve_flag(config, "idleHours", account_id="main", overrides=overrides)
        assert flag.source == "channels.discord.threadBindings.idleHours"
        overrides["channels.discord.accounts.main.threadBindings.idleHours"] = 5
        flag = resolve_flag(config, "idleHours", account_id="main", overrides=overrides)
        assert flag.value == 5.0

    def test_override_without_account_skips_account_paths(self, tmp_path: Path):
        """Without an account id only channel and session overrides apply."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        overrides = {"channels.discord.accounts.main.threadBindings.idleHours": 5}
        assert resolve_flag(config, "idleHours", overrides=overrides).value == 12.0

    def test_bad_stored_override_raises(self, tmp_path: Path):
        """A stored override that is not a valid value fails loudly instead of applying."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError) as info:
            resolve_flag(config, "enabled", overrides={"session.threadBindings.enabled": "maybe"})
        assert str(info.value) == (
            "<runtime>: session.threadBindings.enabled: expected true/false, on/off or yes/no "
            "(got 'maybe')"
        )

    def test_unknown_flag_name(self):
        """An unknown flag name raises a ConfigError listing the flags."""
        with pytest.raises(ConfigError) as info:
            resolve_flag(load_text_dict({}), "idleHour")
        assert str(info.value) == (
            "<runtime>: idleHour: expected a flag name, one of enabled, idleHours, maxAgeHours, "
            "spawnSubagentSessions (unknown flag)"
        )

    def test_unknown_channel(self):
        """Resolving for a channel that has no config table raises."""
        with pytest.raises(ConfigError, match=r"channels\.slack: expected a configured channel"):
            resolve_flag(load_text_dict({}), "enabled", channel="slack")


class TestValidateOverride:
    @pytest.mark.parametrize(
        ("path", "raw", "expected"),
        [
            ("session.threadBindings.enabled", "on", True),
            ("session.threadBindings.enabled", "FALSE", False),
            ("channels.discord.threadBindings.spawnSubagentSessions", True, True),
            ("channels.discord.threadBindings.idleHours", "1.5", 1.5),
            ("channels.discord.accounts.main.threadBindings.maxAgeHours", 0, 0.0),
            ("channels.discord.accounts.other.threadBindings.spawnSubagentSessions", "yes", True),
        ],
    )
    def test_good_values(self, tmp_path: Path, path: str, raw: str | bool | int, expected: object):
        """Valid paths and values come back typed."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        value = validate_override(config, path, raw)
        assert value == expected
        assert type(value) is type(expected)

    def test_negative_hours(self, tmp_path: Path):
        """Negative hours are refused with the accepted range."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError) as info:
            validate_override(config, "session.threadBindings.idleHours", "-1")
        assert str(info.value) == (
            "<runtime>: session.threadBindings.idleHours: expected a number of hours >= 0 "
            "(0 means never) (got '-1')"
        )

    @pytest.mark.parametrize("raw", ["nan", "inf", "soon", True])
    def test_non_numeric_hours(self, tmp_path: Path, raw: str | bool):
        """Hours must be a finite number; booleans and words are refused."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError, match="expected a number of hours >= 0"):
            validate_override(config, "channels.discord.threadBindings.maxAgeHours", raw)

    def test_bool_from_number_refused(self, tmp_path: Path):
        """A number is not accepted for a boolean flag."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError, match="expected true/false, on/off or yes/no"):
            validate_override(config, "session.threadBindings.enabled", 1)

    def test_unknown_account(self, tmp_path: Path):
        """An override for an account not in the file is refused, naming the configured ids."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        path = "channels.discord.accounts.ghost.threadBindings.enabled"
        with pytest.raises(ConfigError) as info:
            validate_override(config, path, "true")
        assert info.value.key_path == path
        assert info.value.expected == "an account id configured in the file (main, other)"

    def test_not_overridable(self, tmp_path: Path):
        """A path that is not a flag is refused, listing the overridable paths."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError) as info:
            validate_override(config, "session.threadBindings.spawnSubagentSessions", "true")
        assert info.value.path == "<runtime>"
        assert info.value.expected.startswith("an overridable flag path, one of ")
        assert "channels.discord.accounts.other.threadBindings.idleHours" in info.value.expected

    def test_overridable_paths(self, tmp_path: Path):
        """Paths cover session (three flags), channel and each account (four flags each)."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        paths = overridable_paths(config)
        assert len(paths) == 3 + 4 + 4 + 4
        assert paths[:4] == [
            "session.threadBindings.enabled",
            "session.threadBindings.idleHours",
            "session.threadBindings.maxAgeHours",
            "channels.discord.threadBindings.enabled",
        ]

    def test_implicit_default_account_is_overridable(self):
        """With no accounts configured the implicit default account's paths are overridable."""
        config = load_text_dict({})
        path = "channels.discord.accounts.default.threadBindings.idleHours"
        assert validate_override(config, path, 3) == 3.0


class TestFlagKeys:
    @pytest.mark.parametrize(
        ("key", "path"),
        [
            ("spawnSubagentSessions", FLAG_SPAWN_SUBAGENT_SESSIONS),
            ("spawn_subagent_sessions", FLAG_SPAWN_SUBAGENT_SESSIONS),
            (" threadBindings.SpawnSubagentSessions ", FLAG_SPAWN_SUBAGENT_SESSIONS),
            ("discord.threadBindings.enabled", "channels.discord.threadBindings.enabled"),
            ("session.threadBindings.idleHours", "session.threadBindings.idleHours"),
            (
                "main.threadBindings.idleHours",
                "channels.discord.accounts.main.threadBindings.idleHours",
            ),
            (
                "channels.discord.accounts.other.threadBindings.enabled",
                "channels.discord.accounts.other.threadBindings.enabled",
            ),
        ],
    )
    def test_an_unambiguous_end_of_a_path_names_the_flag(self, tmp_path: Path, key: str, path: str):
        """Short keys mean the server-wide levels; an account's flag is named with its id."""
        found = find_flag_path(load_text(tmp_path, TWO_ACCOUNTS), key)
        assert (found.path, found.candidates) == (path, (path,))

    @pytest.mark.parametrize(
        ("key", "candidates"),
        [
            (
                "enabled",
                ("session.threadBindings.enabled", "channels.discord.threadBindings.enabled"),
            ),
            (
                "threadBindings.maxAgeHours",
                (
                    "session.threadBindings.maxAgeHours",
                    "channels.discord.threadBindings.maxAgeHours",
                ),
            ),
            ("nope", ()),
            ("", ()),
            ("threadBindings..enabled", ()),
            ("Sessions", ()),
        ],
    )
    def test_an_ambiguous_or_unknown_key_names_no_flag(
        self, tmp_path: Path, key: str, candidates: tuple[str, ...]
    ):
        found = find_flag_path(load_text(tmp_path, TWO_ACCOUNTS), key)
        assert (found.path, found.candidates) == (None, candidates)

    def test_every_path_has_a_shortest_key_that_finds_it(self, tmp_path: Path):
        config = load_text(tmp_path, TWO_ACCOUNTS)
        shortest = {path: shortest_flag_key(config, path) for path in overridable_paths(config)}
        assert shortest[FLAG_SPAWN_SUBAGENT_SESSIONS] == "spawnSubagentSessions"
        assert shortest["channels.discord.threadBindings.enabled"] == (
            "discord.threadBindings.enabled"
        )
        assert shortest["channels.discord.accounts.other.threadBindings.enabled"] == (
            "other.threadBindings.enabled"
        )
        assert all(find_flag_path(config, key).path == path for path, key in shortest.items())


class TestFileErrors:
    def test_missing_explicit_file(self, tmp_path: Path):
        """An explicit path that does not exist is an error, not a silent fall-back to defaults."""
        missing = tmp_path / "nope.toml"
        with pytest.raises(ConfigError) as info:
            load_config(missing, env={})
        assert str(info.value) == f"{missing}: expected an existing TOML file (file not found)"

    def test_directory_instead_of_file(self, tmp_path: Path):
        """A directory given as the config path is reported as unreadable, not a traceback."""
        with pytest.raises(ConfigError) as info:
            load_config(tmp_path, env={})
        assert str(info.value) == f"{tmp_path}: expected a readable TOML file (Is a directory)"

    def test_not_utf8(self, tmp_path: Path):
        """A file that is not UTF-8 is reported with the offset of the bad byte."""
        path = tmp_path / "config.toml"
        path.write_bytes(b"[store]\nurl = '\xff'\n")
        with pytest.raises(ConfigError) as info:
            load_config(path, env={})
        assert (info.value.expected, info.value.problem) == (
            "a UTF-8 encoded TOML file",
            "undecodable byte at offset 15",
        )

    def test_malformed_toml(self, tmp_path: Path):
        """Malformed TOML names the file and the line and column."""
        error = error_for(tmp_path, "[store]\nurl = 'x'\nbusy_timeout_ms = = 5\n")
        assert str(error).startswith(f"{tmp_path / 'config.toml'}: expected valid TOML (")
        assert "line 3, column 19" in error.problem

    def test_unknown_key(self, tmp_path: Path):
        """An unknown key names its full dotted path and the keys that table allows."""
        error = error_for(
            tmp_path, "[channels.discord.threadBindings]\nspawnSubagentSesions = true\n"
        )
        assert str(error) == (
            f"{tmp_path / 'config.toml'}: channels.discord.threadBindings.spawnSubagentSesions: "
            "expected one of the keys enabled, idleHours, maxAgeHours, spawnSubagentSessions "
            "(unknown key)"
        )

    def test_unknown_top_level_table(self, tmp_path: Path):
        """A misspelled top-level table lists the top-level tables."""
        error = error_for(tmp_path, "[sesion.threadBindings]\nenabled = true\n")
        assert error.key_path == "sesion"
        tables = (
            "session, channels, store, bindings, logging, agent, discord, providers, agents, "
            "mcp_servers, playground"
        )
        assert error.expected == f"one of the keys {tables}"

    def test_snake_case_flag_key_rejected(self, tmp_path: Path):
        """Flag keys must use the seed's camelCase; the snake_case spelling is unknown."""
        error = error_for(tmp_path, "[session.threadBindings]\nidle_hours = 3\n")
        assert error.key_path == "session.threadBindings.idle_hours"
        assert error.expected == "one of the keys enabled, idleHours, maxAgeHours"

    def test_unknown_key_inside_account(self, tmp_path: Path):
        """An unknown key under an account keeps the account id in the path."""
        error = error_for(tmp_path, "[channels.discord.accounts.main]\ntokenenv = 'X'\n")
        assert error.key_path == "channels.discord.accounts.main.tokenenv"
        assert error.expected == "one of the keys token_env, threadBindings"

    def test_wrong_type(self, tmp_path: Path):
        """A wrong type names the key path and the expected type."""
        error = error_for(
            tmp_path, "[channels.discord.accounts.main.threadBindings]\nidleHours = '2'\n"
        )
        assert str(error) == (
            f"{tmp_path / 'config.toml'}: channels.discord.accounts.main.threadBindings.idleHours: "
            "expected a number (got a string)"
        )

    def test_wrong_type_for_table(self, tmp_path: Path):
        """A scalar where a table belongs says a table was expected."""
        error = error_for(tmp_path, "[session]\nthreadBindings = true\n")
        assert (error.key_path, error.expected, error.problem) == (
            "session.threadBindings",
            "a table",
            "got a boolean",
        )

    def test_bool_is_not_a_number(self, tmp_path: Path):
        """TOML booleans are not silently turned into numbers."""
        error = error_for(tmp_path, "[bindings]\ntouch_flush_seconds = true\n")
        assert (error.expected, error.problem) == ("a number", "got a boolean")

    @pytest.mark.parametrize(
        ("text", "key_path", "expected", "problem"),
        [
            (
                "[session.threadBindings]\nmaxAgeHours = -1",
                "session.threadBindings.maxAgeHours",
                "a number >= 0",
                "got -1",
            ),
            (
                "[session.threadBindings]\nidleHours = nan",
                "session.threadBindings.idleHours",
                "a finite number",
                "got nan",
            ),
            ("[store]\nbusy_timeout_ms = 0", "store.busy_timeout_ms", "a number > 0", "got 0"),
            (
                "[bindings]\nsweep_interval_seconds = 0.0",
                "bindings.sweep_interval_seconds",
                "a number > 0",
                "got 0.0",
            ),
            (
                "[discord]\nthread_auto_archive_minutes = 30",
                "discord.thread_auto_archive_minutes",
                "one of 60, 1440, 4320 or 10080",
                "got 30",
            ),
            (
                "[logging]\nlevel = 'verbose'",
                "logging.level",
                "one of 'debug', 'info', 'warning' or 'error'",
                "got 'verbose'",
            ),
        ],
    )
    def test_out_of_range(
        self, tmp_path: Path, text: str, key_path: str, expected: str, problem: str
    ):
        """Out-of-range values name the key, the accepted range and the value found."""
        error = error_for(tmp_path, text + "\n")
        assert (error.key_path, error.expected, error.problem) == (key_path, expected, problem)

    def test_store_scheme(self, tmp_path: Path):
        """An unsupported store URL names both accepted schemes."""
        error = error_for(tmp_path, "[store]\nurl = 'postgresql://db/threadbound'\n")
        assert error.key_path == "store.url"
        assert "sqlite+aiosqlite://" in error.expected
        assert "postgresql+asyncpg://" in error.expected
        assert error.problem == "got scheme 'postgresql'"

    def test_store_schemes_are_the_stores_drivers(self):
        """The config accepts exactly the URL schemes the store can open."""
        assert STORE_SCHEMES == SUPPORTED_DRIVERS

    def test_store_password_refused_and_hidden(self, tmp_path: Path):
        """A password in the store URL is refused and never shown."""
        error = error_for(tmp_path, "[store]\nurl = 'postgresql+asyncpg://tb:hunter2@db/tb'\n")
        assert "PGPASSWORD" in error.expected
        assert "hunter2" not in str(error)

    @pytest.mark.parametrize("account_id", ["Main", "has space", "x" * 33, "dot.ted"])
    def test_bad_account_id(self, tmp_path: Path, account_id: str):
        """Account ids outside ^[a-z0-9_-]{1,32}$ are refused with the rule spelled out."""
        error = error_for(tmp_path, f'[channels.discord.accounts."{account_id}"]\n')
        bare = account_id.isalnum()
        quoted = account_id if bare else f'"{account_id}"'
        assert error.key_path == f"channels.discord.accounts.{quoted}"
        assert error.expected == "an account id of 1 to 32 characters from a-z, 0-9, '_' and '-'"
        assert error.problem == f"got {account_id!r}"


class TestSecrets:
    @pytest.mark.parametrize(
        ("text", "key_path", "suggested"),
        [
            (
                f"[channels.discord.accounts.main]\ntoken = '{SECRET}'\n",
                "channels.discord.accounts.main.token",
                "DISCORD_TOKEN_MAIN",
            ),
            (
                f"[channels.discord]\nbotToken = '{SECRET}'\n",
                "channels.discord.botToken",
                "DISCORD_TOKEN",
            ),
            (
                f"[providers.openai]\napi_key = '{SECRET}'\n",
                "providers.openai.api_key",
                "DISCORD_TOKEN",
            ),
            (
                f"[[hooks]]\nname = 'x'\n[[hooks]]\nwebhook_token = '{SECRET}'\n",
                "hooks[1].webhook_token",
                "DISCORD_TOKEN",
            ),
        ],
    )
    def test_secret_key_rejected_without_value(
        self, tmp_path: Path, text: str, key_path: str, suggested: str
    ):
        """A secret-looking key is refused, pointing at token_env, and its value is never shown."""
        error = error_for(tmp_path, text)
        assert error.key_path == key_path
        assert error.expected == (
            "no secrets in the config file: put the secret in an environment variable and "
            f'reference it with token_env (e.g. token_env = "{suggested}")'
        )
        assert SECRET not in str(error)
        assert SECRET not in repr(error.args)

    def test_token_pasted_into_token_env_is_hidden(self, tmp_path: Path):
        """A token pasted as token_env's value is refused without echoing it."""
        error = error_for(tmp_path, f"[channels.discord.accounts.main]\ntoken_env = '{SECRET}'\n")
        assert error.key_path == "channels.discord.accounts.main.token_env"
        assert "NAME of an environment variable" in error.expected
        assert SECRET not in str(error)
        assert error.__cause__ is None
        assert error.__suppress_context__ is True

    @pytest.mark.parametrize(
        "text",
        [
            f"[logging]\nlevel = '{SECRET}'\n",
            f"[agents.a]\ndisplay_name = 'A'\nprovider = '{SECRET}'\n",
            f"[agents.a]\ndisplay_name = 'A'\nhandoff_to = ['{SECRET}']\n",
        ],
    )
    def test_token_pasted_into_a_value_is_not_echoed(self, tmp_path: Path, text: str):
        """A value that could be a secret is described by its length, never shown."""
        error = error_for(tmp_path, text)
        assert SECRET not in str(error)
        assert (
            error.problem
            == f"got a value of {len(SECRET)} characters, not shown in case it is a secret"
        )

    @pytest.mark.parametrize(
        "path", ["session.threadBindings.enabled", "session.threadBindings.idleHours"]
    )
    def test_token_pasted_into_a_runtime_flag_is_not_echoed(self, tmp_path: Path, path: str):
        """/config set with a token as its value answers without the token."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError) as info:
            validate_override(config, path, SECRET)
        assert SECRET not in str(info.value)

    @pytest.mark.parametrize(
        ("value", "shown"),
        [
            ("verbose", "got 'verbose'"),
            ("gpt-4o-mini", "got 'gpt-4o-mini'"),
            (-1, "got -1"),
            (
                "sk-proj-4f9a8b7c6d5e",
                "got a value of 20 characters, not shown in case it is a secret",
            ),
            ("x" * 25, "got a value of 25 characters, not shown in case it is a secret"),
            ("a\u200bb", "got a value of 3 characters, not shown in case it is a secret"),
        ],
    )
    def test_what_an_error_echoes(self, value: object, shown: str):
        """Short words and numbers are echoed; credential-like text is not."""
        assert got(value) == shown

    def test_token_env_is_not_a_secret_key(self, tmp_path: Path):
        """token_env names a variable, so it is accepted."""
        config = load_text(tmp_path, "[channels.discord.accounts.main]\ntoken_env = 'MY_TOKEN'\n")
        assert config.token_env("main") == "MY_TOKEN"


class TestTokens:
    def test_token_read_from_env(self, tmp_path: Path):
        """Each account's token is read from its token_env variable, default names included."""
        env = {"DISCORD_TOKEN_MAIN": SECRET, "OTHER_BOT_TOKEN": "other-token"}
        config = load_text(tmp_path, TWO_ACCOUNTS, env=env)
        assert config.account_ids() == ("main", "other")
        assert config.token_env("main") == "DISCORD_TOKEN_MAIN"
        assert config.account_token("main") == SECRET
        assert config.account_token("other") == "other-token"

    def test_hyphenated_id_default_token_env(self, tmp_path: Path):
        """A hyphenated account id maps to an upper-case variable name with underscores."""
        config = load_text(tmp_path, "[channels.discord.accounts.eu-west]\n")
        assert config.token_env("eu-west") == "DISCORD_TOKEN_EU_WEST"

    def test_implicit_default_account_token(self):
        """With no accounts the implicit default account reads DISCORD_TOKEN."""
        config = parse_config({}, env={"DISCORD_TOKEN": SECRET})
        assert config.account_token("default") == SECRET

    def test_unset_or_empty_token_is_none(self, tmp_path: Path):
        """An unset or empty variable gives None rather than an empty token."""
        config = load_text(tmp_path, TWO_ACCOUNTS, env={"DISCORD_TOKEN_MAIN": ""})
        assert config.account_token("main") is None
        assert config.account_token("other") is None

    def test_token_absent_from_repr_and_dumps(self, tmp_path: Path):
        """The token value appears in neither repr, str, model_dump nor model_dump_json."""
        config = load_text(tmp_path, TWO_ACCOUNTS, env={"DISCORD_TOKEN_MAIN": SECRET})
        assert config.account_token("main") == SECRET
        for text in (repr(config), str(config), str(config.model_dump()), config.model_dump_json()):
            assert SECRET not in text

    def test_unknown_account_token(self, tmp_path: Path):
        """Asking for an unknown account's token raises rather than quietly returning None."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError, match=r"channels\.discord\.accounts\.default: expected"):
            config.account_token("default")


class TestPaths:
    def test_relative_sqlite_path_resolves_against_config_dir(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ):
        """A relative SQLite path is resolved against the config file's directory, not the cwd."""
        config_dir = tmp_path / "etc"
        config_dir.mkdir()
        monkeypatch.chdir(tmp_path)
        path = write(config_dir, "[store]\nurl = 'sqlite+aiosqlite:///data/tb.db?mode=rwc'\n")
        config = load_config(path, env={})
        assert config.base_dir == config_dir
        assert (
            config.store_url() == f"sqlite+aiosqlite:///{config_dir.as_posix()}/data/tb.db?mode=rwc"
        )

    def test_default_sqlite_path_without_file_uses_cwd(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ):
        """With no config file the default database lands in the cwd."""
        monkeypatch.chdir(tmp_path)
        config = load_config(env={})
        assert config.store_url() == f"sqlite:///{tmp_path.as_posix()}/threadbound.db"

    @pytest.mark.parametrize(
        "url",
        [
            "sqlite+aiosqlite:////var/lib/tb.db",
            "sqlite+aiosqlite:///:memory:",
            "sqlite+aiosqlite://",
            "postgresql+asyncpg://tb@db:5432/threadbound",
        ],
    )
    def test_other_urls_unchanged(self, tmp_path: Path, url: str):
        """Absolute, in-memory and PostgreSQL URLs are returned as written."""
        assert load_text(tmp_path, f"[store]\nurl = '{url}'\n").store_url() == url

    def test_json_log_path(self, tmp_path: Path):
        """The JSON log path is relative to the config dir; an empty string disables it."""
        assert load_text(tmp_path, "").json_log_path() == tmp_path / "logs/threadbound.jsonl"
        assert load_text(tmp_path, "[logging]\njson_file = ''\n").json_log_path() is None


class TestTomlKeyPath:
    @pytest.mark.parametrize(
        ("loc", "expected"),
        [
            (("session", "threadBindings", "idleHours"), "session.threadBindings.idleHours"),
            (("session", "thread_bindings", "idle_hours"), "session.threadBindings.idleHours"),
            (
                ("channels", "discord", "accounts", "main", "thread_bindings", "enabled"),
                "channels.discord.accounts.main.threadBindings.enabled",
            ),
            (
                ("channels", "discord", "accounts", "has space", "[key]"),
                'channels.discord.accounts."has space"',
            ),
            (
                ("channels", "discord", "threadBindings", "typo"),
                "channels.discord.threadBindings.typo",
            ),
            (("store", "busy_timeout_ms"), "store.busy_timeout_ms"),
            (("unknown", "deeper", 2, "key"), "unknown.deeper[2].key"),
            ((), ""),
        ],
    )
    def test_loc_shapes(self, loc: tuple[str | int, ...], expected: str):
        """Pydantic locations map to TOML spelling, keeping account ids and unknown keys."""
        assert toml_key_path(loc) == expected


class TestAgentAndProviders:
    def test_agent_defaults(self) -> None:
        """The [agent] table defaults match the loop's documented defaults."""
        agent = parse_config({}, env={}).agent
        assert (agent.steer_skips_pending_tools, agent.follow_up_mode) == (True, "one-at-a-time")
        assert (agent.max_steps_per_turn, agent.max_total_tokens) == (25, 0)

    def test_providers_table(self) -> None:
        """[providers.<name>] tables are validated and keep the key out of the file."""
        config = parse_config(
            {
                "providers": {
                    "local": {"base_url": "http://127.0.0.1:11434/v1/", "model": "qwen"},
                    "openai": {
                        "base_url": "https://api.openai.com/v1",
                        "model": "gpt-4o-mini",
                        "api_key_env": "OPENAI_API_KEY",
                    },
                }
            },
            env={},
        )
        assert config.providers["local"].base_url == "http://127.0.0.1:11434/v1"
        assert config.providers["openai"].api_key_env == "OPENAI_API_KEY"

    def test_bad_follow_up_mode_names_the_key(self) -> None:
        """A wrong [agent] value is reported with its key path."""
        with pytest.raises(ConfigError) as err:
            parse_config({"agent": {"follow_up_mode": "later"}}, env={})
        assert err.value.key_path == "agent.follow_up_mode"


class TestDiscordEndpoints:
    def test_default_is_discords_own(self) -> None:
        """Unset endpoints keep discord.py's own addresses."""
        assert parse_config({}, env={}).discord.api_base_url == ""

    def test_bad_scheme(self) -> None:
        """An endpoint that is not http(s)/ws(s) names the key path."""
        with pytest.raises(ConfigError) as err:
            parse_config({"discord": {"gateway_url": "ftp://x"}}, env={})
        assert err.value.key_path == "discord.gateway_url"


class TestAgentProfiles:
    PROVIDERS = {"local": {"base_url": "http://127.0.0.1:11434/v1", "model": "m"}}

    def test_profiles_are_read(self) -> None:
        """[agents.<id>] tables carry the persona, model, tools and handoff targets."""
        config = parse_config(
            {
                "providers": self.PROVIDERS,
                "agents": {
                    "scout": {
                        "display_name": "Scout",
                        "avatar_url": "https://example.org/scout.png",
                        "provider": "local",
                        "tools": ["sleep", "emit_artifact"],
                        "artifact_types": ["note"],
                        "handoff_to": ["writer"],
                    },
                    "writer": {"display_name": "Writer", "user_startable": False},
                },
            },
            env={},
        )
        assert config.agents["scout"].handoff_to == ["writer"]
        assert config.agents["writer"].user_startable is False

    @pytest.mark.parametrize(
        ("profile", "key_path", "message"),
        [
            ({"display_name": "A", "provider": "nope"}, "agents.a.provider", "got 'nope'"),
            ({"display_name": "A", "handoff_to": ["ghost"]}, "agents.a.handoff_to", "'ghost'"),
            ({"display_name": "A", "tools": ["rm_rf"]}, "agents.a.tools", "unknown: rm_rf"),
            ({"display_name": "A", "avatar_url": "file:///x"}, "agents.a.avatar_url", "http"),
        ],
    )
    def test_bad_profiles_name_the_key(self, profile: dict, key_path: str, message: str) -> None:
        """A profile naming a missing provider or agent, or an unknown tool, is refused clearly."""
        with pytest.raises(ConfigError) as err:
            parse_config({"providers": self.PROVIDERS, "agents": {"a": profile}}, env={})
        assert err.value.key_path == key_path
        assert message in str(err.value)


class TestMcpServers:
    """``[mcp_servers.<name>]`` and the tools that name them: refused with one line."""

    def test_a_working_example(self, tmp_path: Path) -> None:
        config = load_text(
            tmp_path,
            '[mcp_servers.clock]\ncommand = ["python", "-m", "mcp_server_time"]\n'
            'env_from = { TZ = "BOT_TZ" }\ntimeout_seconds = 5\n'
            'require_approval = ["convert_time"]\n'
            '[agent]\ntools = ["mcp:clock", "sleep"]\n'
            '[agents.scout]\ndisplay_name = "Scout"\ntools = ["mcp:clock/get_current_time"]\n',
        )
        clock = config.mcp_servers["clock"]
        assert clock.command == ["python", "-m", "mcp_server_time"]
        assert (clock.env_from, clock.timeout_seconds) == ({"TZ": "BOT_TZ"}, 5)
        assert clock.require_approval == ["convert_time"]
        assert config.agent.tools == ["mcp:clock", "sleep"]
        assert config.agent.tool_result_max_chars == 20_000
        assert config.agent.approval_timeout_seconds == 600
        assert config.discord.show_tool_calls == "compact"

    def test_an_unknown_server(self, tmp_path: Path) -> None:
        error = error_for(tmp_path, '[agents.a]\ndisplay_name = "A"\ntools = ["mcp:nope"]\n')
        assert error.key_path == "agents.a.tools"
        assert "configured [mcp_servers.<name>] table (none configured)" in str(error)
        assert "'mcp:nope'" in str(error)

    def test_a_server_without_command_or_url(self, tmp_path: Path) -> None:
        error = error_for(tmp_path, "[mcp_servers.clock]\ntimeout_seconds = 5\n")
        assert error.key_path == "mcp_servers.clock"
        assert "neither is set" in str(error)

    def test_a_secret_in_the_file_is_refused_without_echo(self, tmp_path: Path) -> None:
        for table in (
            '[mcp_servers.s]\ncommand = ["x"]\nenv = { API_KEY = "sk-live-123456" }\n',
            '[mcp_servers.s]\ncommand = ["x"]\nenv_from = { API_KEY = "sk-live-123456" }\n',
            '[mcp_servers.s]\nurl = "https://user:sk-live-123456@example.org/mcp"\n',
        ):
            error = error_for(tmp_path, table)
            assert "sk-live-123456" not in str(error)
            assert "\n" not in str(error)

    def test_env_from_names_are_fine_even_when_they_look_secret(self, tmp_path: Path) -> None:
        config = load_text(
            tmp_path, '[mcp_servers.s]\ncommand = ["x"]\nenv_from = { API_KEY = "S_KEY" }\n'
        )
        assert config.mcp_servers["s"].env_from == {"API_KEY": "S_KEY"}

    @pytest.mark.parametrize("name", ["a__b", "Clock", "x" * 33, "-a"])
    def test_server_names_fit_tool_names(self, tmp_path: Path, name: str) -> None:
        error = error_for(tmp_path, f'[mcp_servers."{name}"]\ncommand = ["x"]\n')
        assert "its tools are named <server>__<tool>" in str(error)

    def test_malformed_tool_references(self, tmp_path: Path) -> None:
        error = error_for(tmp_path, '[agent]\ntools = ["mcp:", "mcp:clock/"]\n')
        assert "unknown: mcp:, mcp:clock/" in str(error)
