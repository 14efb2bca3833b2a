"""Tests for core.config.flags: flag precedence, account isolation and runtime overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import (
    FLAG_SPAWN_SUBAGENT_SESSIONS,
    Config,
    FlagValue,
    find_flag_path,
    overridable_paths,
    parse_config,
    resolve_flag,
    resolve_thread_bindings,
    shortest_flag_key,
    validate_override,
)
from core.errors import ConfigError
from tests.core.config.helpers import SECRET, TWO_ACCOUNTS, load_text


def load_text_dict(data: dict[str, object]) -> Config:
    """Build a config from a dict with an empty environment."""
    return parse_config(data, env={})


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
            "spawnSubagentSessions, scheduledTasks (unknown flag)"
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
        assert len(paths) == 3 + 5 + 5 + 5
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

    @pytest.mark.parametrize(
        "path", ["session.threadBindings.enabled", "session.threadBindings.idleHours"]
    )
    def test_token_pasted_into_a_runtime_flag_is_not_echoed(self, tmp_path: Path, path: str):
        """/config set with a token as its value answers without the token."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        with pytest.raises(ConfigError) as info:
            validate_override(config, path, SECRET)
        assert SECRET not in str(info.value)


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


class TestFlagLevel:
    @pytest.mark.parametrize(
        ("source", "level"),
        [
            ("default", "default"),
            ("session.threadBindings.idleHours", "session"),
            ("channels.discord.threadBindings.enabled", "channel"),
            ("channels.discord.accounts.main.threadBindings.idleHours", "account"),
        ],
    )
    def test_each_source_names_its_level(self, source: str, level: str) -> None:
        """A resolved flag says which level decided, whatever the flag is called."""
        assert FlagValue(value=True, source=source).level == level


class TestMatrixKeys:
    def test_a_short_key_in_a_matrix_room_is_the_matrix_flag(self, tmp_path: Path):
        """The same key means the asking channel's flag; Discord's reading is unchanged."""
        config = load_text(tmp_path, TWO_ACCOUNTS)
        matrix = "channels.matrix.threadBindings.spawnSubagentSessions"
        assert find_flag_path(config, "spawnSubagentSessions", channel="matrix").path == matrix
        assert find_flag_path(config, "spawnSubagentSessions").path == FLAG_SPAWN_SUBAGENT_SESSIONS
        assert shortest_flag_key(config, matrix, channel="matrix") == "spawnSubagentSessions"
        assert not any(".discord." in p for p in overridable_paths(config, channel="matrix"))

    def test_a_matrix_account_of_any_name_resolves_at_the_matrix_channel(
        self, tmp_path: Path
    ) -> None:
        """A Matrix account is known by its own table, not Discord's account list: one
        named "home" resolves its flags (at the Matrix channel's level, it has none of its
        own) where it used to be refused as "no such account"."""
        text = TWO_ACCOUNTS + (
            "\n[channels.matrix.threadBindings]\nspawnSubagentSessions = true\n"
            '\n[channels.matrix.accounts.home]\nhomeserver = "https://matrix.example.org"\n'
            'user_id = "@tb:example.org"\naccess_token_env = "MX_TOKEN"\n'
        )
        config = load_text(tmp_path, text, env={"MX_TOKEN": "syt_abc"})
        value = resolve_flag(config, "spawnSubagentSessions", channel="matrix", account_id="home")
        assert value.value is True
        assert value.source == "channels.matrix.threadBindings.spawnSubagentSessions"

    def test_a_matrix_override_is_validated_like_discords(self, tmp_path: Path):
        config = load_text(tmp_path, TWO_ACCOUNTS)
        assert validate_override(config, "channels.matrix.threadBindings.idleHours", "3") == 3.0
        with pytest.raises(ConfigError, match="not overridable"):
            validate_override(config, "channels.matrix.accounts.x.threadBindings.enabled", "on")
        with pytest.raises(ConfigError, match="not overridable"):
            validate_override(config, "channels.irc.threadBindings.enabled", "on")
