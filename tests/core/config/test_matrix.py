"""The Matrix tables: [channels.matrix.accounts.<id>] and [channels.matrix.threadBindings]."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import load_config, parse_config, resolve_flag, resolve_thread_bindings
from core.errors import ConfigError
from tests.core.config.helpers import SECRET, error_for, load_text, write

MATRIX_TOKEN = "syt_dGhyZWFkYm91bmQ_aBcDeFgHiJkLmNoPqRsT_0aBcDe"
ENV = {"MATRIX_ACCESS_TOKEN": MATRIX_TOKEN}

ACCOUNT = """
[channels.matrix.accounts.default]
homeserver = "http://127.0.0.1:8008/"
user_id = "@threadbound:example.org"
access_token_env = "MATRIX_ACCESS_TOKEN"
"""


def matrix_error(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> ConfigError:
    """Load TOML text (with the Matrix token set unless ``env`` says otherwise) that must fail."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env=ENV if env is None else env)
    return info.value


class TestMatrixAccounts:
    def test_an_account_with_defaults(self, tmp_path: Path) -> None:
        """An account needs three keys; rooms, admin level and registration have defaults."""
        config = load_text(tmp_path, ACCOUNT, env=ENV)
        account = config.channels.matrix.accounts["default"]
        assert config.matrix_account_ids() == ("default",)
        assert account.homeserver == "http://127.0.0.1:8008"  # trailing slash dropped
        assert account.user_id == "@threadbound:example.org"
        assert (account.rooms, account.admin_power_level) == ([], 100)
        assert config.matrix_appservice_registration("default") is None
        assert config.matrix_access_token("default") == MATRIX_TOKEN

    def test_every_key(self, tmp_path: Path) -> None:
        """rooms, admin_power_level and appservice_registration are read as written."""
        (tmp_path / "threadbound-appservice.yaml").write_text("id: threadbound\n")
        text = ACCOUNT + (
            'rooms = ["!abc:example.org", "!Nr4xZSBpdDEyIGlkcw", "!x:[::1]:8448"]\n'
            "admin_power_level = 50\n"
            'appservice_registration = "threadbound-appservice.yaml"\n'
        )
        config = load_text(tmp_path, text, env=ENV)
        account = config.channels.matrix.accounts["default"]
        assert account.rooms == ["!abc:example.org", "!Nr4xZSBpdDEyIGlkcw", "!x:[::1]:8448"]
        assert account.admin_power_level == 50
        registration = tmp_path / "threadbound-appservice.yaml"
        assert config.matrix_appservice_registration("default") == registration

    def test_no_matrix_table_no_matrix_account(self) -> None:
        """Matrix is only run when configured: no implicit account, unlike Discord's."""
        config = parse_config({}, env=ENV)
        assert config.matrix_account_ids() == ()
        with pytest.raises(ConfigError) as err:
            config.matrix_access_token("default")
        assert err.value.key_path == "channels.matrix.accounts.default"

    def test_two_accounts_read_their_own_variables(self, tmp_path: Path) -> None:
        """Each account's token comes from the variable it names."""
        text = ACCOUNT + (
            "[channels.matrix.accounts.staging]\n"
            'homeserver = "https://matrix.example.net"\n'
            'user_id = "@tb:example.net"\n'
            'access_token_env = "MATRIX_TOKEN_STAGING"\n'
        )
        config = load_text(tmp_path, text, env={**ENV, "MATRIX_TOKEN_STAGING": "other"})
        assert config.matrix_account_ids() == ("default", "staging")
        assert config.matrix_access_token("staging") == "other"

    def test_token_never_in_repr_or_dumps(self, tmp_path: Path) -> None:
        """The access token lives outside the model: no repr or dump shows it."""
        config = load_text(tmp_path, ACCOUNT, env=ENV)
        assert MATRIX_TOKEN not in repr(config)
        assert MATRIX_TOKEN not in config.model_dump_json()
        assert MATRIX_TOKEN not in str(config.model_dump())


class TestMatrixErrors:
    def test_missing_variable_names_it(self, tmp_path: Path) -> None:
        """An unset access_token_env variable is an error naming the variable."""
        error = matrix_error(tmp_path, ACCOUNT, env={})
        assert error.key_path == "channels.matrix.accounts.default.access_token_env"
        assert "MATRIX_ACCESS_TOKEN" in error.expected
        assert error.problem == "MATRIX_ACCESS_TOKEN is not set"

    def test_empty_variable_names_it_not_its_value(self, tmp_path: Path) -> None:
        """A variable set but empty is refused too; no token value appears anywhere."""
        error = matrix_error(tmp_path, ACCOUNT, env={"MATRIX_ACCESS_TOKEN": ""})
        assert error.problem == "MATRIX_ACCESS_TOKEN is empty"
        assert MATRIX_TOKEN not in str(error)

    def test_a_name_that_may_be_a_token_is_not_echoed(self, tmp_path: Path) -> None:
        """A missing variable whose name is not in capitals (maybe a pasted token) is not named."""
        token_like = "MDAxOGxvY2F0aW9uIGV4YW1wbGUub3JnCjAwMTNpZGVudGlmaWVy"
        error = matrix_error(tmp_path, ACCOUNT.replace("MATRIX_ACCESS_TOKEN", token_like), env={})
        assert error.problem == "the variable it names is not set"
        assert token_like not in str(error)

    def test_unknown_key_in_account(self, tmp_path: Path) -> None:
        """An unknown account key is refused, listing the keys an account takes."""
        error = matrix_error(tmp_path, ACCOUNT + "device_id = 'ABC'\n")
        assert error.key_path == "channels.matrix.accounts.default.device_id"
        assert error.problem == "unknown key"
        assert error.expected == (
            "one of the keys homeserver, user_id, access_token_env, rooms, "
            "admin_power_level, appservice_registration"
        )

    def test_unknown_key_in_channel(self, tmp_path: Path) -> None:
        """[channels.matrix] has threadBindings and accounts, nothing else."""
        error = matrix_error(tmp_path, "[channels.matrix]\nhomeserver = 'http://x'\n")
        assert error.key_path == "channels.matrix.homeserver"
        assert error.expected == "one of the keys threadBindings, accounts"

    def test_unknown_flag(self, tmp_path: Path) -> None:
        """[channels.matrix.threadBindings] takes the Discord flags, by the same spelling."""
        error = matrix_error(tmp_path, "[channels.matrix.threadBindings]\nspawn_subagents = true\n")
        assert error.key_path == "channels.matrix.threadBindings.spawn_subagents"
        assert error.problem == "unknown key"

    @pytest.mark.parametrize(
        "user_id",
        [
            "threadbound",
            "threadbound:example.org",
            "@threadbound",
            "@:example.org",
            "@thread bound:example.org",
            "@threadbound:",
            "@threadbound:example.org:port",
            "#threadbound:example.org",
        ],
    )
    def test_bad_user_id(self, tmp_path: Path, user_id: str) -> None:
        """A user id not of the form @localpart:server is refused, saying the form."""
        text = ACCOUNT.replace("@threadbound:example.org", user_id)
        error = matrix_error(tmp_path, text)
        assert error.key_path == "channels.matrix.accounts.default.user_id"
        assert error.expected.startswith("a full Matrix user id, @localpart:server")

    @pytest.mark.parametrize(
        "user_id", ["@tb:example.org:8448", "@tb:127.0.0.1", "@tb:[::1]:8448", "@Old_Style:x.org"]
    )
    def test_good_user_ids(self, tmp_path: Path, user_id: str) -> None:
        """Ports, IP literals and the spec's historical localparts are accepted."""
        text = ACCOUNT.replace("@threadbound:example.org", user_id)
        config = load_text(tmp_path, text, env=ENV)
        assert config.channels.matrix.accounts["default"].user_id == user_id

    def test_alias_is_not_a_room_id(self, tmp_path: Path) -> None:
        """rooms takes room ids; an alias is refused, naming its place in the list."""
        error = matrix_error(tmp_path, ACCOUNT + "rooms = ['!a:example.org', '#ops:example.org']\n")
        assert error.key_path == "channels.matrix.accounts.default.rooms"
        assert error.problem == "item 1 is not a room id"

    def test_room_listed_twice(self, tmp_path: Path) -> None:
        """A room listed twice is a mistake, not a double subscription."""
        error = matrix_error(tmp_path, ACCOUNT + "rooms = ['!a:example.org', '!a:example.org']\n")
        assert error.problem == "a room id is listed twice"

    @pytest.mark.parametrize("level", [0, -1])
    def test_admin_power_level_above_everyone(self, tmp_path: Path, level: int) -> None:
        """Power level 0 is every member's: an admin level must be at least 1."""
        error = matrix_error(tmp_path, ACCOUNT + f"admin_power_level = {level}\n")
        assert error.key_path == "channels.matrix.accounts.default.admin_power_level"
        assert error.expected == "a number >= 1"

    @pytest.mark.parametrize(
        ("homeserver", "problem"),
        [
            ("matrix.example.org", "no scheme"),
            ("ws://matrix.example.org", "got scheme 'ws'"),
            (f"https://tb:{SECRET}@matrix.example.org", "the URL has extra parts (not shown)"),
            (f"https://matrix.example.org/?access_token={SECRET}", "the URL has extra parts"),
        ],
    )
    def test_bad_homeserver(self, tmp_path: Path, homeserver: str, problem: str) -> None:
        """The homeserver is an http(s) URL with no credentials; the URL is never echoed."""
        text = ACCOUNT.replace("http://127.0.0.1:8008/", homeserver)
        error = matrix_error(tmp_path, text)
        assert error.key_path == "channels.matrix.accounts.default.homeserver"
        assert error.problem.startswith(problem)
        assert SECRET not in str(error)

    def test_required_keys(self, tmp_path: Path) -> None:
        """An account without user_id names the missing key."""
        text = "\n".join(line for line in ACCOUNT.splitlines() if "user_id" not in line)
        error = matrix_error(tmp_path, text)
        assert error.key_path == "channels.matrix.accounts.default.user_id"
        assert error.expected == "Field required"

    def test_token_pasted_into_access_token_env_is_hidden(self, tmp_path: Path) -> None:
        """A token where its variable's name belongs is refused without echoing it."""
        text = ACCOUNT.replace('"MATRIX_ACCESS_TOKEN"', f'"{MATRIX_TOKEN}"')
        error = matrix_error(tmp_path, text)
        assert error.key_path == "channels.matrix.accounts.default.access_token_env"
        assert "if it is the access token itself" in error.problem
        assert MATRIX_TOKEN not in str(error)

    def test_access_token_in_the_file_points_to_access_token_env(self, tmp_path: Path) -> None:
        """An access_token key is refused as a secret, pointing at access_token_env."""
        error = error_for(tmp_path, ACCOUNT + f'access_token = "{MATRIX_TOKEN}"\n')
        assert error.key_path == "channels.matrix.accounts.default.access_token"
        assert 'access_token_env = "MATRIX_ACCESS_TOKEN"' in error.expected
        assert MATRIX_TOKEN not in str(error)

    def test_missing_registration_file(self, tmp_path: Path) -> None:
        """A registration path that names no file is refused when the file is loaded."""
        error = matrix_error(tmp_path, ACCOUNT + 'appservice_registration = "nowhere.yaml"\n')
        assert error.key_path == "channels.matrix.accounts.default.appservice_registration"
        assert error.problem == "no such file"

    def test_one_account_per_user(self, tmp_path: Path) -> None:
        """Two accounts logged in as the same user would both answer: refused."""
        second = ACCOUNT.replace("accounts.default", "accounts.again")
        error = matrix_error(tmp_path, ACCOUNT + second)
        assert error.key_path == "channels.matrix.accounts"
        assert error.problem == "accounts default and again are the same user"

    def test_bad_account_id(self, tmp_path: Path) -> None:
        """Matrix account ids follow the same pattern as Discord's."""
        error = matrix_error(tmp_path, ACCOUNT.replace("accounts.default", "accounts.Main"))
        assert error.expected == "an account id of 1 to 32 characters from a-z, 0-9, '_' and '-'"


class TestMatrixFlags:
    def test_channel_flags_resolve_for_matrix(self, tmp_path: Path) -> None:
        """[channels.matrix.threadBindings] sets Matrix's flags and leaves Discord's alone."""
        text = ACCOUNT + (
            "[channels.matrix.threadBindings]\nspawnSubagentSessions = true\nidleHours = 2\n"
        )
        config = load_text(tmp_path, text, env=ENV)
        matrix = resolve_thread_bindings(config, channel="matrix")
        assert (matrix.spawn_subagent_sessions, matrix.idle_hours) == (True, 2.0)
        assert resolve_thread_bindings(config).spawn_subagent_sessions is False
        flag = resolve_flag(config, "spawnSubagentSessions", channel="matrix")
        assert flag.source == "channels.matrix.threadBindings.spawnSubagentSessions"

    def test_unset_matrix_flags_inherit_the_session(self, tmp_path: Path) -> None:
        """Unset Matrix flags fall back to [session.threadBindings] and the defaults."""
        config = load_text(tmp_path, "[session.threadBindings]\nidleHours = 5\n", env={})
        flag = resolve_flag(config, "idleHours", channel="matrix")
        assert (flag.value, flag.source) == (5.0, "session.threadBindings.idleHours")

    def test_a_matrix_account_resolves_at_the_channel(self, tmp_path: Path) -> None:
        """A Matrix account has no flags of its own: asked for one, the channel's answers."""
        text = ACCOUNT + "[channels.matrix.threadBindings]\nidleHours = 3\n"
        config = load_text(tmp_path, text, env=ENV)
        flag = resolve_flag(config, "idleHours", channel="matrix", account_id="default")
        assert (flag.value, flag.source) == (3.0, "channels.matrix.threadBindings.idleHours")
        settings = resolve_thread_bindings(config, channel="matrix", account_id="default")
        assert settings.idle_hours == 3.0
