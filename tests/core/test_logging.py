from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from core.logging import (
    REDACTED,
    RedactSecrets,
    bind_context,
    configure_logging,
    get_logger,
    is_secret_key,
    register_secret,
    reset_logging,
    shutdown_logging,
    write_event,
)

BOT_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456"
WEBHOOK_TOKEN = "wHt0k3n-abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
HEADER_TOKEN = "hdrSecret.9876543210zyxwvutsrqp"
REGISTERED = "registered-provider-key-42"
FIELD_TOKEN = "field-token-value-77"
TRACEBACK_SECRET = "tb-secret-from-exception-31"


pytestmark = pytest.mark.usefixtures("reset_logging_after")


def read_json(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class TestConfigureLogging:
    def test_json_line_has_envelope_and_context(self, tmp_path: Path) -> None:
        """A structlog event becomes one JSON line with envelope and bound context."""
        path = tmp_path / "logs" / "bot.jsonl"
        configure_logging(json_path=path, console=False)
        with bind_context(session_key="s-1", binding_id="b-1", account="acct", guild="g-1"):
            get_logger("threadbound.test").info("binding.bound", conversation_id="42")
        shutdown_logging()

        (line,) = read_json(path)
        assert line["event"] == "binding.bound"
        assert line["level"] == "info"
        assert line["logger"] == "threadbound.test"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", str(line["timestamp"]))
        assert (line["session_key"], line["binding_id"], line["account"], line["guild"]) == (
            "s-1",
            "b-1",
            "acct",
            "g-1",
        )
        assert line["conversation_id"] == "42"

    def test_stdlib_logger_lands_in_the_same_file(self, tmp_path: Path) -> None:
        """A discord.http stdlib line is written as JSON with the same envelope."""
        path = tmp_path / "bot.jsonl"
        configure_logging(json_path=path, console=False)
        with bind_context(account="acct"):
            logging.getLogger("discord.http").warning("rate limited on %s", "/channels/1")
        shutdown_logging()

        (line,) = read_json(path)
        assert line["event"] == "rate limited on /channels/1"
        assert (line["logger"], line["level"], line["account"]) == (
            "discord.http",
            "warning",
            "acct",
        )
        assert "timestamp" in line

    def test_reconfiguring_replaces_handlers(self, tmp_path: Path) -> None:
        """Calling configure_logging again does not duplicate lines or keep the old file."""
        first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        log = get_logger("t")
        configure_logging(json_path=first, console=False)
        configure_logging(json_path=first, console=False)
        log.info("once")
        configure_logging(json_path=second, console=False)
        log.info("twice")
        shutdown_logging()

        assert [e["event"] for e in read_json(first)] == ["once"]
        assert [e["event"] for e in read_json(second)] == ["twice"]

    def test_level_filters_and_follows_reconfiguration(self, tmp_path: Path) -> None:
        """A logger from get_logger picks up a new level when logging is reconfigured."""
        path = tmp_path / "bot.jsonl"
        log = get_logger("t")
        configure_logging(level="warning", json_path=path, console=False)
        log.info("hidden")
        log.warning("shown")
        configure_logging(level="debug", json_path=path, console=False)
        log.debug("debug shown")
        shutdown_logging()

        assert [e["event"] for e in read_json(path)] == ["shown", "debug shown"]

    def test_console_is_readable_without_colors(self) -> None:
        """The console renderer writes plain text to a non-tty stream."""
        stream = io.StringIO()
        configure_logging(console_stream=stream)
        get_logger("t").info("delivery.sent", path="webhook")
        text = stream.getvalue()
        assert "delivery.sent" in text
        assert "path=webhook" in text
        assert "\x1b[" not in text

    def test_disabled_writes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """enabled=False installs no handler and drops every level, critical included."""
        configure_logging(json_path=tmp_path / "never.jsonl", enabled=False)
        get_logger("t").critical("nothing")
        logging.getLogger("discord").critical("nothing either")
        assert not (tmp_path / "never.jsonl").exists()
        assert capsys.readouterr() == ("", "")

    def test_unknown_level_is_rejected(self) -> None:
        """A misspelt level fails with a message naming the valid ones."""
        with pytest.raises(ValueError, match="debug, info, warning"):
            configure_logging(level="verbose")

    def test_capture_logs_sees_configured_loggers(self) -> None:
        """capture_logs() still works after configure_logging, for cached loggers too."""
        configure_logging(console=False)
        log = get_logger("t")
        log.info("warm the cache")
        with capture_logs() as logs:
            log.info("routing.resolved", mode="bound")
        assert logs == [{"event": "routing.resolved", "mode": "bound", "log_level": "info"}]

    def test_structlog_proxies_survive_reset(self) -> None:
        """A structlog.get_logger() proxy cached while configured is captured after a reset."""
        proxy = structlog.get_logger("elsewhere")
        configure_logging(console=False)
        proxy.info("warm the cache")
        reset_logging()
        with capture_logs() as logs:
            proxy.info("after")
        assert logs == [{"event": "after", "log_level": "info"}]


class TestWriteEvent:
    """write_event writes the line the logger's own method would, from the dict it is given."""

    FIELDS = {"mode": "bound", "reason": "requester-match", "token": "field-token-value-77"}

    def test_same_line_as_the_logger_method(self, tmp_path: Path) -> None:
        """Envelope, bound and context fields, redaction: one line each way, equal but the time."""
        path = tmp_path / "bot.jsonl"
        configure_logging(json_path=path, console=False)
        log = get_logger("core.routing").bind(actor_task="route", mode="overridden")
        with bind_context(session_key="s-1", account="acct"):
            log.info("routing.resolved", **self.FIELDS)
            write_event(log, "info", "routing.resolved", dict(self.FIELDS))
        shutdown_logging()

        method, direct = read_json(path)
        del method["timestamp"], direct["timestamp"]
        assert direct == method
        assert (direct["mode"], direct["actor_task"], direct["session_key"]) == (
            "bound",
            "route",
            "s-1",
        )
        assert direct["token"] == REDACTED

    def test_level_off_writes_nothing(self, tmp_path: Path) -> None:
        """A level below the configured one is dropped, as the logger's method drops it."""
        path = tmp_path / "bot.jsonl"
        configure_logging(level="warning", json_path=path, console=False)
        log = get_logger("t")
        write_event(log, "info", "hidden", {"n": 1})
        write_event(log, "warning", "shown", {"n": 2})
        shutdown_logging()

        assert [(e["event"], e["level"]) for e in read_json(path)] == [("shown", "warning")]

    def test_capture_logs_sees_it(self) -> None:
        """Tests that capture logs see events written this way, uncached proxies included."""
        with capture_logs() as logs:
            write_event(get_logger("t"), "error", "delivery.failed", {"code": 50083})
        assert logs == [{"code": 50083, "event": "delivery.failed", "log_level": "error"}]

    def test_unconfigured_structlog_renders_to_its_default_logger(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """structlog's defaults (a console string to a print logger) work too."""
        structlog.reset_defaults()
        write_event(structlog.get_logger("t"), "info", "plain.default", {"n": 3})
        assert "plain.default" in capsys.readouterr().out

    def test_other_loggers_are_called(self) -> None:
        """An object that is not a structlog logger gets its level method called."""
        calls: list[tuple[str, dict[str, object]]] = []

        class Recorder:
            def warning(self, event: str, **kw: object) -> None:
                calls.append((event, kw))

        write_event(Recorder(), "warning", "delivery.fallback", {"reason": "x"})
        assert calls == [("delivery.fallback", {"reason": "x"})]


class TestRedactionEndToEnd:
    def test_secrets_never_reach_file_or_console(self, tmp_path: Path) -> None:
        """Token, webhook token, header, registered secret, token field, traceback: all redacted."""
        path = tmp_path / "bot.jsonl"
        stream = io.StringIO()
        configure_logging(json_path=path, console_stream=stream, secrets=[REGISTERED])
        log = get_logger("threadbound.test")
        log.info(f"logged in with {BOT_TOKEN}")
        log.info(
            "webhook send", url=f"https://discord.com/api/v10/webhooks/1234567/{WEBHOOK_TOKEN}"
        )
        log.info("request", headers=f"Authorization: Bot {HEADER_TOKEN}")
        log.info("provider ready", detail=f"key {REGISTERED} loaded")
        log.info("config", token=FIELD_TOKEN)
        logging.getLogger("discord.http").debug("token %s", BOT_TOKEN)
        logging.getLogger("discord.http").warning(
            "PATCH /webhooks/1234567/%s failed (Authorization: Bearer %s)",
            WEBHOOK_TOKEN,
            HEADER_TOKEN,
        )
        try:
            raise RuntimeError(f"login failed: {TRACEBACK_SECRET} / {BOT_TOKEN}")
        except RuntimeError:
            log.exception("login.failed")
        register_secret(TRACEBACK_SECRET)  # registered late: still applies to later lines
        try:
            raise RuntimeError(f"again: {TRACEBACK_SECRET}")
        except RuntimeError:
            logging.getLogger("aiohttp").exception("stdlib traceback")
        shutdown_logging()

        written = path.read_text(encoding="utf-8")
        console = stream.getvalue()
        for secret in (BOT_TOKEN, WEBHOOK_TOKEN, HEADER_TOKEN, REGISTERED, FIELD_TOKEN):
            assert secret not in written
            assert secret not in console
        assert f"again: {TRACEBACK_SECRET}" not in written
        assert REDACTED in written
        assert REDACTED in console
        lines = read_json(path)
        assert len(lines) == 8
        assert "webhooks/1234567/[redacted]" in str(lines[1]["url"])
        assert lines[4]["token"] == REDACTED
        assert "Traceback" in str(lines[6]["exception"])
        assert "again: [redacted]" in str(lines[7]["exception"])


class TestRedactSecrets:
    def redact(self, processor: RedactSecrets | None = None, **event: object) -> dict[str, object]:
        return (processor or RedactSecrets(use_registry=False))(None, "info", dict(event))

    def test_secret_keys_at_any_depth(self) -> None:
        """Secret-looking keys are redacted in nested dicts and lists, case-insensitively."""
        out = self.redact(
            event="x",
            webhook_token="abc",
            Authorization="Bot abc",
            nested={"apiKey": "k", "items": [{"Password": "p"}, "plain"]},
            pin=12345678,
        )
        assert out["webhook_token"] == REDACTED
        assert out["Authorization"] == REDACTED
        assert out["nested"] == {"apiKey": REDACTED, "items": [{"Password": REDACTED}, "plain"]}
        assert out["pin"] == 12345678

    def test_usage_fields_are_not_secret(self) -> None:
        """Token usage counters stay visible; only credential-like names are secret."""
        assert not is_secret_key("max_tokens")
        assert not is_secret_key("prompt_tokens")
        assert not is_secret_key("token_count")
        assert is_secret_key("bot_token")
        assert is_secret_key("client-secret")
        out = self.redact(event="usage", max_tokens=100, note="max_tokens=100 tokens used")
        assert out == {"event": "usage", "max_tokens": 100, "note": "max_tokens=100 tokens used"}

    def test_patterns_inside_text(self) -> None:
        """Bot/Bearer credentials, headers, key=value pairs, token shapes in text: redacted."""
        out = self.redact(
            event=f"Bearer {HEADER_TOKEN} and {BOT_TOKEN}",
            a=f"authorization='Bot {HEADER_TOKEN}'",
            b="connect bot_token=s3cr3t-value&x=1",
            c="{'password': 'hunter2hunter2'}",
            d="/webhooks/555/abc-DEF_123/messages/9",
        )
        assert out == {
            "event": f"Bearer {REDACTED} and {REDACTED}",
            "a": f"authorization='Bot {REDACTED}'",
            "b": f"connect bot_token={REDACTED}&x=1",
            "c": f"{{'password': '{REDACTED}'}}",
            "d": f"/webhooks/555/{REDACTED}/messages/9",
        }

    def test_ordinary_text_is_untouched(self) -> None:
        """Prose, dotted names, hostnames and ids are left alone."""
        event = {
            "event": "Bot connected to gateway-us-east1-b.discord.gg",
            "logger": "threadbound.routing.resolved",
            "session": "agent:main:subagent:abc123",
            "ts": "2026-01-01T12:00:00.123456Z",
        }
        assert self.redact(**event) == event

    def test_exact_secrets_and_short_ones(self) -> None:
        """Given secrets are redacted anywhere; ones shorter than 8 characters are ignored."""
        processor = RedactSecrets(secrets=["xyzzy-secret-1", "short"], use_registry=False)
        out = self.redact(processor, event="a xyzzy-secret-1b short", n=["xyzzy-secret-1"])
        assert out == {"event": f"a {REDACTED}b short", "n": [REDACTED]}

    def test_other_objects_are_scanned_through_repr(self) -> None:
        """An object whose repr holds a secret reaches the renderer as a redacted string."""
        out = self.redact(event="x", error=ValueError(f"bad {BOT_TOKEN}"))
        assert out["error"] == f"ValueError('bad {REDACTED}')"


class TestBindContext:
    def test_nesting_and_restoring(self) -> None:
        """Inner blocks add fields, None is not bound, leaving a block restores the outer view."""
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
            log = get_logger("t")
            with bind_context(session_key="s", account="a"):
                with bind_context(binding_id="b", account=None, custom="c"):
                    log.info("inner")
                log.info("outer")
            log.info("none")
        assert logs[0] == {
            "event": "inner",
            "session_key": "s",
            "account": "a",
            "binding_id": "b",
            "custom": "c",
            "log_level": "info",
        }
        assert logs[1] == {
            "event": "outer",
            "session_key": "s",
            "account": "a",
            "log_level": "info",
        }
        assert logs[2] == {"event": "none", "log_level": "info"}

    async def test_tasks_keep_their_own_context(self) -> None:
        """Two concurrent actors each log with their own session key across awaits."""
        log = get_logger("t")
        gate = asyncio.Event()

        async def actor(key: str) -> None:
            with bind_context(session_key=key):
                await gate.wait()
                log.info("tick")

        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
            async with asyncio.timeout(5), asyncio.TaskGroup() as tg:
                tg.create_task(actor("one"))
                tg.create_task(actor("two"))
                await asyncio.sleep(0)
                gate.set()
        assert sorted(e["session_key"] for e in logs) == ["one", "two"]
