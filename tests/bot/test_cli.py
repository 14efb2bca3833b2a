"""``python -m bot`` as a user runs it: clear one-line errors, canary exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bot(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DISCORD_TOKEN")}
    environment["PYTHONPATH"] = str(ROOT)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class TestRun:
    def test_missing_token_names_the_variable(self, tmp_path: Path) -> None:
        """An account without its token (while another has one) stops with exit 2 naming it.

        With no token at all the run command opens the playground instead
        (tests/playground/test_run_command.py).
        """
        config = tmp_path / "config.toml"
        config.write_text("[channels.discord.accounts.main]\n[channels.discord.accounts.helper]\n")
        result = run_bot(cwd=tmp_path, env={"DISCORD_TOKEN_MAIN": "main-token"})
        assert result.returncode == 2
        assert "set the environment variable DISCORD_TOKEN_HELPER" in result.stderr
        assert "Traceback" not in result.stderr

    def test_bad_config_is_one_line(self, tmp_path: Path) -> None:
        """An unknown key stops start-up with one line naming file and key path."""
        config = tmp_path / "config.toml"
        config.write_text("[channels.discord.threadBindings]\nspawnSubagentSesions = true\n")
        result = run_bot("--config", str(config), cwd=tmp_path)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert str(config) in lines[0]
        assert "channels.discord.threadBindings.spawnSubagentSesions" in lines[0]

    def test_secret_in_config_not_echoed(self, tmp_path: Path) -> None:
        """A token pasted into the file is refused without being repeated."""
        config = tmp_path / "config.toml"
        config.write_text('[channels.discord.accounts.main]\ntoken = "MTIz.secret-value-123"\n')
        result = run_bot("--config", str(config), cwd=tmp_path)
        assert result.returncode == 2
        assert "secret-value-123" not in result.stderr + result.stdout


class TestHelp:
    def test_help_lists_every_command_one_line_each(self, tmp_path: Path) -> None:
        """``--help`` names run and canary, each on its own line with what it does."""
        result = run_bot("--help", cwd=tmp_path)
        assert result.returncode == 0
        listed = result.stdout.split("commands:\n", 1)[1].splitlines()
        assert [line.split()[0] for line in listed if line.startswith("  ")] == ["run", "canary"]
        assert "  canary  the canary report of the bot's JSON log" in result.stdout
        assert "python -m bot canary LOGFILE" in result.stdout

    def test_an_unknown_command_names_the_known_ones(self, tmp_path: Path) -> None:
        result = run_bot("canery", "bot.jsonl", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [
            "python -m bot: unknown command 'canery'; the commands are run, canary "
            "(python -m bot --help says what each does)"
        ]

    def test_run_may_be_named(self, tmp_path: Path) -> None:
        """``python -m bot run --config …`` is the default command, spelled out."""
        config = tmp_path / "config.toml"
        config.write_text("[channels.discord.threadBindings]\nspawnSubagentSesions = true\n")
        result = run_bot("run", "--config", str(config), cwd=tmp_path)
        assert result.returncode == 2
        assert "spawnSubagentSesions" in result.stderr


def log_line(event: str, minute: int, **fields: object) -> str:
    stamp = f"2026-01-01T00:{minute:02d}:00.000000Z"
    return json.dumps({"event": event, "timestamp": stamp, "level": "info", **fields})


class TestCanary:
    def test_violations_exit_1_and_are_named(self, tmp_path: Path) -> None:
        """A duplicate delivery and a hidden fallback make the report exit 1 naming both."""
        binding = {
            "binding_id": "bind-7",
            "target_session_key": "agent:1",
            "target_kind": "subagent",
            "channel": "discord",
            "account": "main",
            "conversation_id": "t1",
            "parent_conversation_id": "p1",
            "bound_by": "u1",
            "expires_at": None,
        }
        sent = {
            "completion_id": "done-42",
            "path": "webhook",
            "mode": "bound",
            "binding_id": "bind-7",
            "target_session_key": "agent:1",
            "channel": "discord",
            "account": "main",
            "destination": "t1",
        }
        fallback = {
            "completion_id": "done-43",
            "reason": "no-requester-match",
            "target_session_key": "agent:1",
            "channel": "discord",
            "account": "main",
            "requester_conversation_id": "p1",
            "destination": "p1",
        }
        log = tmp_path / "bot.jsonl"
        log.write_text(
            "\n".join(
                [
                    log_line("binding.bound", 1, **binding),
                    log_line("delivery.sent", 2, **sent),
                    log_line("delivery.sent", 3, **sent),
                    log_line("delivery.fallback", 4, **fallback),
                    "not json at all",
                ]
            )
            + "\n"
        )
        result = run_bot("canary", str(log), cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "done-42" in result.stdout
        assert "bind-7" in result.stdout

        as_json = run_bot("canary", str(log), "--json", cwd=tmp_path)
        assert as_json.returncode == 1
        assert json.loads(as_json.stdout)["violations"] == 2

    def test_bad_duration(self, tmp_path: Path) -> None:
        """An unreadable --since is a usage error, not a traceback."""
        log = tmp_path / "bot.jsonl"
        log.write_text("")
        result = run_bot("canary", str(log), "--since", "soon", cwd=tmp_path)
        assert result.returncode == 2
        assert "invalid duration 'soon'" in result.stderr
