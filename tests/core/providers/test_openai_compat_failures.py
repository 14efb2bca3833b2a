"""OpenAICompatibleProvider when things go wrong: retries, refusals, broken connections."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from core.errors import ProviderHTTPError, ProviderUnavailable
from core.providers import ProviderEvent, TextDelta
from tests.fixtures.fake_llm import FakeLLM, Reply, chunk, text_reply
from tests.fixtures.providers import HELLO, WAIT, MakeProvider, collect, drain, texts

KEY = "sk-test-0123456789abcdef"


class TestRetries:
    async def test_429_waits_for_retry_after_then_succeeds(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """Retry-After seconds are honoured through the injected sleep; nothing really waits."""
        llm.add(Reply(status=429, headers={"Retry-After": "3"}), text_reply("ok"))
        events = await collect(make_provider())
        assert texts(events) == ["ok"]
        assert sleeps == [3.0]
        assert len(llm.requests) == 2

    async def test_retry_after_is_capped_by_backoff_max(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """A server asking for an hour does not stall the session for an hour."""
        llm.add(Reply(status=429, headers={"Retry-After": "3600"}), text_reply("ok"))
        await collect(make_provider(backoff_max_s=7))
        assert sleeps == [7]

    async def test_5xx_backs_off_exponentially_then_succeeds(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """500 then 503 are retried after base, then twice base."""
        llm.add(Reply(status=500), Reply(status=503), text_reply("ok"))
        events = await collect(make_provider(backoff_base_s=0.5))
        assert texts(events) == ["ok"]
        assert sleeps == [0.5, 1.0]

    async def test_jitter_keeps_delays_between_half_and_full_backoff(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """With jitter on, each delay is in [delay/2, delay)."""
        llm.add(Reply(status=502), Reply(status=502), text_reply("ok"))
        await collect(make_provider(jitter=True, backoff_base_s=2))
        assert 1 <= sleeps[0] < 2
        assert 2 <= sleeps[1] < 4

    async def test_spent_retries_raise_unavailable_with_the_last_status(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """After max_retries the error names the attempts and the last status."""
        llm.add(*[Reply(status=503)] * 3)
        with pytest.raises(ProviderUnavailable) as caught:
            await collect(make_provider(max_retries=2))
        assert (caught.value.attempts, caught.value.last_status) == (3, 503)
        assert not caught.value.partial
        assert "3 attempts" in str(caught.value)
        assert len(sleeps) == 2

    async def test_an_error_chunk_inside_a_200_stream_is_retried(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """OpenRouter-style {"error": {...}} with a 5xx code, before any text, is retried."""
        llm.add(
            Reply(chunks=[{"error": {"message": "upstream overloaded", "code": 502}}]),
            text_reply("ok"),
        )
        assert texts(await collect(make_provider())) == ["ok"]

    async def test_connection_refused_is_retried_then_unavailable(
        self, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """No server at all: connection errors are retried, then reported."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        provider = make_provider(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
        with pytest.raises(ProviderUnavailable, match="did not answer after 2 attempts"):
            await collect(provider)
        assert len(sleeps) == 1


class TestRefusals:
    async def test_401_is_not_retried_and_never_shows_the_key(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float]
    ) -> None:
        """A refused key fails at once, names the variable to check, and hides the key."""
        echo = {"error": {"message": f"Incorrect API key provided: {KEY}."}}
        llm.add(Reply(status=401, body=json.dumps(echo), content_type="application/json"))
        provider = make_provider(api_key=KEY, api_key_env="OPENAI_API_KEY")
        with pytest.raises(ProviderHTTPError) as caught:
            await collect(provider)
        error = caught.value
        assert error.status == 401
        assert KEY not in str(error)
        assert KEY not in error.body_excerpt
        assert "OPENAI_API_KEY" in str(error)
        assert len(llm.requests) == 1
        assert sleeps == []

    async def test_400_carries_the_servers_message(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """The server's own explanation is in the error."""
        body = {"error": {"message": "tools are not supported by this model"}}
        llm.add(Reply(status=400, body=json.dumps(body), content_type="application/json"))
        with pytest.raises(ProviderHTTPError, match="tools are not supported by this model"):
            await collect(make_provider())

    async def test_404_points_at_base_url_and_model(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A wrong path or model name says which settings to check."""
        llm.add(Reply(status=404, body='{"error": "model \\"nope\\" not found"}'))
        with pytest.raises(ProviderHTTPError, match="base_url") as caught:
            await collect(make_provider(), model="nope")
        assert "'nope'" in str(caught.value)


class TestBrokenConnections:
    @pytest.mark.parametrize(
        "dropped",
        [Reply(drop_before_headers=True), text_reply("lost", drop_after=0)],
        ids=["before-headers", "after-headers"],
    )
    async def test_a_drop_before_any_event_is_retried(
        self, llm: FakeLLM, make_provider: MakeProvider, sleeps: list[float], dropped: Reply
    ) -> None:
        """Nothing reached the consumer yet, so the request is simply made again."""
        llm.add(dropped, text_reply("ok"))
        assert texts(await collect(make_provider())) == ["ok"]
        assert len(llm.requests) == 2
        assert len(sleeps) == 1

    async def test_a_drop_after_events_raises_partial_unavailable(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """Text already yielded cannot be taken back: no retry, ProviderUnavailable(partial)."""
        llm.add(text_reply("Once upon", " a time", drop_after=3), text_reply("never sent"))
        seen: list[ProviderEvent] = []
        with pytest.raises(ProviderUnavailable) as caught:
            await drain(make_provider(), seen)
        assert texts(seen) == ["Once upon", " a time"]
        assert caught.value.partial
        assert "broke off" in str(caught.value)
        assert len(llm.requests) == 1

    async def test_a_stream_ending_without_done_or_finish_is_cut_off(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A body that ends cleanly but early is a drop too, not a short answer."""
        llm.add(Reply(chunks=[chunk({"content": "half"})], done=False))
        with pytest.raises(ProviderUnavailable, match="closed before the answer was complete"):
            await collect(make_provider())

    async def test_cancelling_the_consumer_closes_the_connection(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """The server sees the disconnect as soon as the consuming task is cancelled."""
        llm.add(text_reply("thinking", "...", hold_after=2))
        first = asyncio.Event()

        async def consume() -> None:
            async for _ in make_provider().stream(HELLO):
                first.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(WAIT):
            await first.wait()
            await llm.holding.wait()
            task.cancel()
            await llm.disconnected.wait()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_aclose_on_the_stream_closes_the_connection(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A consumer that stops early and closes the generator frees the connection."""
        llm.add(text_reply("a", "b", hold_after=2))
        stream = make_provider().stream(HELLO)
        async with asyncio.timeout(WAIT):
            assert await anext(stream) == TextDelta(text="a")
            await llm.holding.wait()
            await stream.aclose()
            await llm.disconnected.wait()
