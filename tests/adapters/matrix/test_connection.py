"""adapters.matrix.connection without a homeserver: what is retried, and what is not.

The connection against a real Synapse is in tests/matrix/test_connection.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from mautrix.errors import MForbidden, MLimitExceeded, MUnknownToken
from structlog.testing import capture_logs

from adapters.matrix import connection as module
from adapters.matrix.connection import MatrixConnection
from core.config import MatrixAccountConfig

TOKEN = "syt_dGI_NotARealTokenAtAll_0abcde"


@pytest.fixture
async def connection(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MatrixConnection]:
    monkeypatch.setattr(module, "FIRST_BACKOFF", 0.0)  # retried at once: no test sleeps
    account = MatrixAccountConfig(
        homeserver="http://127.0.0.1:9",
        user_id="@threadbound:example.org",
        access_token_env="MATRIX_ACCESS_TOKEN",
    )
    async with aiohttp.ClientSession() as session:
        yield MatrixConnection("default", account, TOKEN, session=session)


class TestRetrying:
    async def test_transient_failures_are_retried_then_answered(
        self, connection: MatrixConnection
    ) -> None:
        """A rate limit and a dropped connection are tried again; the answer comes through."""
        failures: list[Exception] = [
            MLimitExceeded(429, "Too Many Requests"),
            aiohttp.ServerDisconnectedError(),
        ]

        async def call() -> str:
            if failures:
                raise failures.pop(0)
            return "answer"

        with capture_logs() as logs:
            assert await connection._retrying("sync", call) == "answer"
        retried = [e for e in logs if e["event"] == "matrix.request_retried"]
        assert [(e["request"], e["error"].split(",")[0]) for e in retried] == [
            ("sync", "HTTP 429"),
            ("sync", "ServerDisconnectedError: Server disconnected"),
        ]
        assert TOKEN not in repr(logs)

    @pytest.mark.parametrize(
        "exc", [MForbidden(403, "You are not invited"), MUnknownToken(401, "Invalid token")]
    )
    async def test_a_refusal_is_raised_at_once(
        self, connection: MatrixConnection, exc: Exception
    ) -> None:
        """A 4xx other than a rate limit is the homeserver's answer: not retried."""
        calls = 0

        async def call() -> None:
            nonlocal calls
            calls += 1
            raise exc

        with pytest.raises(type(exc)):
            await connection._retrying("join", call)
        assert calls == 1

    async def test_a_batch_whose_handling_fails_is_read_again_and_the_loop_goes_on(
        self, connection: MatrixConnection
    ) -> None:
        """The store failing mid-batch stops neither the account nor the bot: the position
        is not moved, the same batch is handed over again, then saved."""
        handled: list[tuple[str | None, str]] = []
        failures = [OSError("the store did not answer")]

        class Handler:
            async def resume_from(self) -> str | None:
                return None

            async def handle(self, rooms: object, /, *, since: str | None) -> None:
                if failures:
                    raise failures.pop(0)

            async def handled(self, next_batch: str, /) -> None:
                handled.append((connection._since, next_batch))

        async def sync(**_options: object) -> dict[str, object]:
            return {"next_batch": "s2", "rooms": {}}

        connection.handler = Handler()
        connection.client.sync = sync  # type: ignore[method-assign]
        with capture_logs() as logs:
            await connection.sync_once()
            assert connection._since is None  # not moved past the failed batch
            await connection.sync_once()
        assert handled == [(None, "s2")]
        assert connection._since == "s2"
        assert [e["event"] for e in logs if e["log_level"] == "error"] == ["matrix.batch_failed"]

    def test_may_serve(self, connection: MatrixConnection) -> None:
        """Without rooms every room is served."""
        assert connection.may_serve("!any:example.org")
