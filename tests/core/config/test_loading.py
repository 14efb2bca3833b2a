"""Tests for core.config.loading: reading the file, its errors, secrets, tokens and paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.config import load_config, parse_config, resolve_thread_bindings, toml_key_path
from core.errors import ConfigError
from tests.core.config.helpers import SECRET, TWO_ACCOUNTS, error_for, load_text, write

ROOT = Path(__file__).resolve().parents[3]


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
        keys += ["workspace_dir", "idle_stop_seconds", "start_timeout_seconds", "acp"]
        keys += ["homeserver", "user_id", "access_token_env", "rooms", "admin_power_level"]
        keys += ["appservice_registration"]
        assert [key for key in keys if f"{key} =" not in text] == []

    def test_the_matrix_example_loads_uncommented(self, tmp_path: Path):
        """The commented Matrix tables are a working config once uncommented."""
        text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
        start = text.index("# [channels.matrix.threadBindings]")
        block = text[start : text.index("\n\n", start)]
        settings = re.compile(r"# (\[[a-z.]+\]|[a-z_]+ = .*)")  # tables and keys, not prose
        lines = [m[1] for line in block.splitlines() if (m := settings.fullmatch(line))]
        (tmp_path / "threadbound-appservice.yaml").write_text("id: threadbound\n")
        config = load_text(tmp_path, "\n".join(lines), env={"MATRIX_ACCESS_TOKEN": "t"})
        account = config.channels.matrix.accounts["default"]
        assert (account.user_id, account.rooms) == (
            "@threadbound:example.org",
            ["!abc:example.org"],
        )
        assert config.matrix_access_token("default") == "t"

    def test_the_readme_acp_example_loads_as_written(self, tmp_path: Path):
        """The README's [acp_agents] example is a working config (its key read from the
        bot's environment, never the file)."""
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        section = readme.split("### External agents (ACP)", 1)[1]
        block = section.split("```toml\n", 1)[1].split("```", 1)[0]
        path = tmp_path / "config.toml"
        path.write_text(block, encoding="utf-8")
        config = load_config(path, env={"BOT_OPENAI_KEY": "k"})
        assert config.agents["coder"].acp == "opencode"
        assert config.acp_agents["opencode"].command == ["opencode", "acp"]
        assert config.acp_workspace_root("opencode") == tmp_path / "acp-workspaces"


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
            "expected one of the keys enabled, idleHours, maxAgeHours, spawnSubagentSessions, "
            "scheduledTasks (unknown key)"
        )

    def test_unknown_top_level_table(self, tmp_path: Path):
        """A misspelled top-level table lists the top-level tables."""
        error = error_for(tmp_path, "[sesion.threadBindings]\nenabled = true\n")
        assert error.key_path == "sesion"
        tables = (
            "session, channels, store, bindings, logging, scheduler, agent, discord, providers, "
            "agents, mcp_servers, acp_agents, playground"
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
