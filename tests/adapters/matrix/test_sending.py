"""adapters.matrix.sending over a scripted homeserver on loopback: rate limits and retries.

The same sends against a real Synapse are in tests/matrix/test_streaming.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from mautrix.client import Client
from mautrix.types import UserID
from structlog.testing import capture_logs

from adapters.matrix.sending import MatrixSender
from core.clock import FakeClock
from core.errors import DeliveryError

TOKEN = "syt_dGI_NotARealTokenAtAll_0abcde"
Answer = Callable[[], web.StreamResponse]


@dataclass
class Homeserver:
    """Answers each PUT with the next scripted answer (200 with an event id when none)."""

    answers: list[Answer] = field(default_factory=list)
    seen: list[tuple[str, float]] = field(default_factory=list)
    """Each send's transaction id, and the fake clock's seconds when it arrived."""
    clock: FakeClock = field(default_factory=FakeClock)

    async def put(self, request: web.Request) -> web.StreamResponse:
        started = self.clock.now() - FakeClock().now()
        self.seen.append((request.match_info["txn"], started.total_seconds()))
        if self.answers:
            answer = self.answers.pop(0)
            if answer is DROP:  # the connection drops before any answer
                assert request.transport is not None
                request.transport.close()
            return answer()
        return web.json_response({"event_id": f"$e{len(self.seen)}"})


def limited(ms: int) -> Answer:
    return lambda: web.json_response(
        {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": ms},
        status=429,
    )


def _dropped() -> web.StreamResponse:
    return web.Response()


DROP: Answer = _dropped


def failing(status: int) -> Answer:
    return lambda: web.json_response({"errcode": "M_UNKNOWN", "error": "boom"}, status=status)


@pytest.fixture
async def server() -> AsyncIterator[tuple[Homeserver, MatrixSender]]:
    homeserver = Homeserver()
    app = web.Application()
    app.router.add_put("/_matrix/client/v3/rooms/{room}/send/{kind}/{txn}", homeserver.put)
    async with TestServer(app) as test_server, aiohttp.ClientSession() as session:
        client = Client(
            mxid=UserID("@bot:example.org"),
            base_url=str(test_server.make_url("")),
            token=TOKEN,
            client_session=session,
        )
        yield homeserver, MatrixSender(client, clock=homeserver.clock)


async def ticking(clock: FakeClock, work: asyncio.Task[str]) -> str:
    """Run ``work``, moving the fake clock on by each sleep it takes, until it ends."""
    async with asyncio.timeout(10):
        while not work.done():
            sleeping = asyncio.ensure_future(clock.wait_for_sleepers(1))
            await asyncio.wait({sleeping, work}, return_when=asyncio.FIRST_COMPLETED)
            if sleeping.done():
                await clock.advance(0.5)
            else:
                sleeping.cancel()
    return work.result()


class TestRateLimit:
    async def test_retry_after_ms_is_waited_out_then_the_same_send_lands(
        self, server: tuple[Homeserver, MatrixSender]
    ) -> None:
        """An M_LIMIT_EXCEEDED with retry_after_ms 2000: the send is tried again, with the
        same transaction id, no sooner than two seconds later."""
        homeserver, sender = server
        homeserver.answers = [limited(2_000)]
        send = asyncio.create_task(sender.send("!r:example.org", {"body": "hi"}, txn="t1"))
        with capture_logs() as logs:
            assert await ticking(homeserver.clock, send) == "$e2"
        assert [txn for txn, _ in homeserver.seen] == ["t1", "t1"]
        assert homeserver.seen[1][1] >= 2.0
        assert [e["wait_s"] for e in logs if e["event"] == "matrix.rate_limited"] == [2.0]
        assert TOKEN not in repr(logs)

    async def test_nothing_else_is_sent_before_the_wait_has_passed(
        self, server: tuple[Homeserver, MatrixSender]
    ) -> None:
        """A second send begun during the wait goes only once it has passed."""
        homeserver, sender = server
        homeserver.answers = [limited(3_000)]
        first = asyncio.create_task(sender.send("!r:example.org", {"body": "a"}, txn="a"))
        async with asyncio.timeout(10):
            await homeserver.clock.wait_for_sleepers(1)  # the first waits its turn
        second = asyncio.create_task(sender.send("!r:example.org", {"body": "b"}, txn="b"))
        await ticking(homeserver.clock, first)
        await ticking(homeserver.clock, second)
        assert all(at >= 3.0 for _, at in homeserver.seen[1:])
        assert sorted(txn for txn, _ in homeserver.seen[1:]) == ["a", "b"]


class TestRetries:
    @pytest.mark.parametrize("status", [500, 502, 503])
    async def test_a_5xx_is_retried_with_the_same_transaction_id(
        self, server: tuple[Homeserver, MatrixSender], status: int
    ) -> None:
        """A 5xx answer is tried again with the same transaction id: the homeserver keeps
        one event for it, so a send that landed before its answer was lost posts once."""
        homeserver, sender = server
        homeserver.answers = [failing(status), failing(status)]
        send = asyncio.create_task(sender.send("!r:example.org", {"body": "x"}, txn="same"))
        assert await ticking(homeserver.clock, send) == "$e3"
        assert [txn for txn, _ in homeserver.seen] == ["same"] * 3

    async def test_a_dropped_connection_is_retried_with_the_same_transaction_id(
        self, server: tuple[Homeserver, MatrixSender]
    ) -> None:
        """Connections dropped before the answer (aiohttp itself tries a reused one once
        more): the send goes again until answered, with the same transaction id."""
        homeserver, sender = server
        homeserver.answers = [DROP, DROP, DROP]
        send = asyncio.create_task(sender.send("!r:example.org", {"body": "x"}, txn="same"))
        with capture_logs() as logs:
            assert await ticking(homeserver.clock, send) == "$e4"
        assert [txn for txn, _ in homeserver.seen] == ["same"] * 4
        assert [e["status"] for e in logs if e["event"] == "matrix.send_retry"]
        assert {e["status"] for e in logs if e["event"] == "matrix.send_retry"} == {0}

    async def test_a_refusal_is_not_retried(self, server: tuple[Homeserver, MatrixSender]) -> None:
        """A 403 ends the send at once with a DeliveryError naming what the server said."""
        homeserver, sender = server
        homeserver.answers = [failing(403)]
        with pytest.raises(DeliveryError, match="HTTP 403, M_UNKNOWN, boom") as raised:
            await sender.send("!r:example.org", {"body": "x"}, txn="t")
        assert raised.value.code == 403
        assert len(homeserver.seen) == 1

    async def test_failing_every_attempt_ends_in_a_delivery_error(
        self, server: tuple[Homeserver, MatrixSender]
    ) -> None:
        """Five 500s in a row: the send gives up, each try with the same transaction id."""
        homeserver, sender = server
        homeserver.answers = [failing(500)] * 5
        send = asyncio.create_task(sender.send("!r:example.org", {"body": "x"}, txn="t"))
        with pytest.raises(DeliveryError, match="HTTP 500"):
            await ticking(homeserver.clock, send)
        assert [txn for txn, _ in homeserver.seen] == ["t"] * 5

    async def test_a_send_after_the_client_closed_is_a_delivery_failure(
        self, server: tuple[Homeserver, MatrixSender]
    ) -> None:
        """A stopping account's last words (a "bot is stopping" notice after its session
        closed) end in a DeliveryError the presenter logs, not an unretrieved exception."""
        homeserver, sender = server
        await sender.client.api.session.close()
        with pytest.raises(DeliveryError, match="client is closed"):
            await sender.send("!r:example.org", {"body": "x"}, txn="t")
        assert homeserver.seen == []
