"""McpConnection against real servers: mcp-server-time and the toolbox over stdio, an
MCPServer over streamable HTTP. Time is a FakeClock; nothing sleeps for timing.

The servers that survive their tests are started once for the module (side by side,
on the module's event loop); a test that kills, restarts or closes one starts its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from core.clock import FakeClock
from core.mcp import McpConnection, McpUnavailable
from tests.core.mcp.helpers import (
    MODERN,
    TIME_SERVER,
    TOOLBOX,
    adder,
    alive,
    connection,
    free_port,
    http_server,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
WITHIN = 20  # seconds a real server gets to answer; never reached when things work

# The bot would pass os.environ; these are the only variables its servers may see.
BOT_ENV = {"BOT_TOKEN": "tok-9f8e7d6c5b4a", "UNRELATED_SECRET": "other-1a2b3c4d5e"}


@dataclass
class Shared:
    """Connections the module's tests share: each test leaves them usable."""

    clock: FakeClock
    time: McpConnection
    toolbox: McpConnection  # mode auto: a 2026-era connection; ["python", ...], env_from
    toolbox_legacy: McpConnection  # the 2025 handshake


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared() -> AsyncIterator[Shared]:
    clock = FakeClock()
    servers = Shared(
        clock=clock,
        time=connection(clock, name="clock", command=TIME_SERVER),
        toolbox=connection(
            clock, command=["python", TOOLBOX], env_from={"TOKEN": "BOT_TOKEN"}, env=BOT_ENV
        ),
        toolbox_legacy=connection(clock, mode="legacy"),
    )
    every = [servers.time, servers.toolbox, servers.toolbox_legacy]
    await asyncio.gather(*(server.tools() for server in every))
    yield servers
    await asyncio.gather(*(server.close() for server in every))


def names(tools: tuple[object, ...]) -> list[str]:
    return [tool.name for tool in tools]  # type: ignore[attr-defined]


async def pid_of(server: McpConnection) -> int:
    return int((await server.call("pid", {})).text)


class TestStdio:
    async def test_lists_tools_with_schemas_and_model_names(self, shared: Shared) -> None:
        """mcp-server-time's two tools come with their JSON schema and a model name."""
        tools = {tool.name: tool for tool in await shared.time.tools()}
        assert set(tools) == {"get_current_time", "convert_time"}
        now = tools["get_current_time"]
        assert now.server == "clock"
        assert now.model_name == "clock__get_current_time"
        assert now.input_schema["properties"]["timezone"]["type"] == "string"
        assert now.description
        assert shared.time.protocol_version == MODERN  # "auto" found a 2026-era server

    async def test_call_answers_the_text(self, shared: Shared) -> None:
        """A call's text content is the result, here the time server's JSON."""
        result = await shared.time.call("get_current_time", {"timezone": "Asia/Tokyo"})
        assert not result.is_error
        assert json.loads(result.text)["timezone"] == "Asia/Tokyo"

    async def test_arguments_reach_the_server(self, shared: Shared) -> None:
        """convert_time gets its three arguments as given."""
        result = await shared.time.call(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert json.loads(result.text)["target"]["datetime"].endswith("21:00:00+09:00")

    async def test_tool_error_is_an_error_result(self, shared: Shared) -> None:
        """A tool that fails answers is_error with its message; the connection is fine."""
        result = await shared.time.call("get_current_time", {"timezone": "Mars/Olympus"})
        assert result.is_error
        assert "Mars/Olympus" in result.text
        assert shared.time.alive
        assert shared.time.starts == 1

    async def test_legacy_era_lists_and_calls(self, shared: Shared) -> None:
        """Over the 2025 initialize handshake the same tools list and answer."""
        server = shared.toolbox_legacy
        assert server.protocol_version == "2025-11-25"
        assert {"echo", "wait", "die"} <= set(names(await server.tools()))
        assert (await server.call("echo", {"text": "old school"})).text == "old school"

    async def test_big_result_arrives_whole(self, shared: Shared) -> None:
        """A 300,000-character answer comes through in one piece."""
        result = await shared.toolbox.call("big", {"n": 300_000})
        assert result.text == "x" * 300_000

    async def test_tools_are_cached_until_they_change(self, shared: Shared) -> None:
        """Without a change notice the same tuple comes back, not a new listing."""
        assert await shared.toolbox.tools() is await shared.toolbox.tools()

    async def test_python_means_the_bots_interpreter(self, shared: Shared) -> None:
        """A command starting with "python" runs the interpreter running the bot."""
        assert (await shared.toolbox.call("interpreter", {})).text == sys.executable

    async def test_env_from_passes_only_the_named_variables(self, shared: Shared) -> None:
        """TOKEN gets BOT_TOKEN's value; the bot's other variables stay out."""
        assert (await shared.toolbox.call("env", {"name": "TOKEN"})).text == BOT_ENV["BOT_TOKEN"]
        for other in ("UNRELATED_SECRET", "BOT_TOKEN"):
            assert (await shared.toolbox.call("env", {"name": other})).text == "<unset>"


class TestHttp:
    async def test_list_and_call(self, clock: FakeClock) -> None:
        """A streamable-HTTP server lists and answers like a stdio one."""
        async with http_server(adder(), free_port()) as url:
            web = connection(clock, name="web", url=url)
            try:
                assert names(await web.tools()) == ["add"]
                assert web.transport == "http"
                result = await web.call("add", {"a": 2, "b": 40})
                assert (result.text, result.is_error) == ("42", False)
            finally:
                await web.close()

    async def test_gone_server_then_back(self, clock: FakeClock) -> None:
        """A call to a stopped HTTP server fails with a notice; once it is back, the next
        call reconnects."""
        port = free_port()
        web = connection(clock, name="web", url=f"http://127.0.0.1:{port}/mcp")
        try:
            async with http_server(adder(), port):
                await web.call("add", {"a": 1, "b": 1})
            with pytest.raises(McpUnavailable) as caught:
                await web.call("add", {"a": 1, "b": 1})
            assert "closed the connection" in caught.value.notice
            async with http_server(adder(), port):
                assert (await web.call("add", {"a": 1, "b": 2})).text == "3"
            assert web.starts == 2
        finally:
            await web.close()


class TestToolListChanged:
    @pytest.mark.parametrize("era", ["toolbox", "toolbox_legacy"])
    async def test_change_notice_lists_again(self, shared: Shared, era: str) -> None:
        """After the server says its list changed (a listen stream on a 2026 connection,
        a notification on a 2025 one), tools() lists again and has the new tool."""
        server: McpConnection = getattr(shared, era)
        before = await server.tools()
        assert "fresh" not in names(before)
        changed = server.next_list_change()
        assert (await server.call("grow", {})).text == "grown"
        async with asyncio.timeout(WITHIN):
            await changed.wait()
        after = await server.tools()
        assert "fresh" in names(after)
        assert after is not before
        assert (await server.call("fresh", {})).text == "fresh!"
        assert server.starts == 1


class TestTimeouts:
    async def test_hung_call_times_out_on_the_clock(self, shared: Shared) -> None:
        """A call past timeout_seconds on the bot's clock is cancelled and reported;
        the connection stays and answers the next call."""
        clock, server = shared.clock, shared.toolbox
        call = asyncio.create_task(server.call("wait", {"seconds": 3600}))
        await clock.wait_for_sleepers()
        with capture_logs() as logs:
            await clock.advance(30)
            with pytest.raises(McpUnavailable) as caught:
                await call
        assert caught.value.notice == "🔌 Tool server `toolbox` did not answer within 30 s."
        assert caught.value.server == "toolbox"
        assert [entry["event"] for entry in logs] == ["mcp.timed_out"]
        assert (await server.call("echo", {"text": "still here"})).text == "still here"
        assert server.starts == 1

    async def test_hung_start_times_out_and_is_reaped(
        self, clock: FakeClock, tmp_path: Path
    ) -> None:
        """A server that never answers the handshake counts as not started; its process
        is stopped."""
        fifo = tmp_path / "pid"
        os.mkfifo(fifo)
        mute = "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); sys.stdin.read()"
        server = connection(clock, name="mute", command=[sys.executable, "-c", mute, str(fifo)])
        start = asyncio.create_task(server.tools())
        pid = int(await asyncio.to_thread(fifo.read_text))  # the process is up and mute
        await clock.wait_for_sleepers()
        await clock.advance(30)
        with pytest.raises(McpUnavailable, match="did not finish starting within 30 s"):
            await start
        assert not server.alive
        assert not alive(pid)
        await server.close()


class TestFailures:
    @pytest.mark.parametrize("era", ["toolbox", "toolbox_legacy"])
    async def test_killed_server_is_restarted_by_the_next_call(
        self, shared: Shared, era: str
    ) -> None:
        """A server that dies mid-call fails that call (never retried) and is reaped;
        the next call starts a new process."""
        server: McpConnection = getattr(shared, era)
        first, starts = await pid_of(server), server.starts
        with capture_logs() as logs, pytest.raises(McpUnavailable) as caught:
            await server.call("die", {})
        assert caught.value.notice == (
            "🔌 Tool server `toolbox` is not running (it exited); "
            "it will be restarted on the next call."
        )
        assert [entry["event"] for entry in logs] == ["mcp.server_exited"]
        assert not server.alive
        assert not alive(first)
        assert await pid_of(server) != first
        assert server.starts == starts + 1

    async def test_cancelled_call_leaves_the_connection_usable(self, shared: Shared) -> None:
        """Cancelling the caller cancels the call and raises CancelledError; the next
        call works on the same process."""
        server = shared.toolbox
        pid = await pid_of(server)
        call = asyncio.create_task(server.call("wait", {"seconds": 3600}))
        await shared.clock.wait_for_sleepers()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await server.call("echo", {"text": "hi"})).text == "hi"
        assert await pid_of(server) == pid

    async def test_error_answer_keeps_the_connection(self, shared: Shared) -> None:
        """A JSON-RPC error from the server is reported; the server keeps running."""
        server = shared.toolbox
        pid = await pid_of(server)
        with pytest.raises(McpUnavailable) as caught:
            await server.call("refuse", {})
        assert caught.value.notice == (
            "🔌 Tool server `toolbox` answered with an error: refused on purpose"
        )
        assert await pid_of(server) == pid

    async def test_missing_env_variable_is_named_not_shown(self, clock: FakeClock) -> None:
        """A variable env_from names but the bot lacks: the notice names it; no value of
        the bot's environment appears anywhere."""
        server = connection(
            clock, env_from={"TOKEN": "BOT_TOKEN", "KEY": "MISSING_KEY"}, env=BOT_ENV
        )
        with pytest.raises(McpUnavailable) as caught:
            await server.tools()
        assert caught.value.notice == (
            "🔌 Tool server `toolbox` could not be started: "
            "the bot's environment has no MISSING_KEY."
        )
        text = f"{caught.value} {caught.value.notice}"
        assert all(value not in text for value in BOT_ENV.values())
        assert server.starts == 0

    async def test_command_not_found(self, clock: FakeClock) -> None:
        """A program that does not exist is reported as not started, with the OS error."""
        server = connection(clock, name="ghost", command=["/nonexistent/mcp-ghost"])
        with pytest.raises(McpUnavailable) as caught:
            await server.call("anything", {})
        assert caught.value.notice.startswith(
            "🔌 Tool server `ghost` could not be started: FileNotFoundError"
        )
        assert not server.alive


class TestLifecycle:
    async def test_one_start_for_concurrent_uses_and_close_reaps_it(self, clock: FakeClock) -> None:
        """Five sessions asking at once share one start and one process; close() stops
        that process (failing a call under way), is idempotent, and a later use starts
        nothing nobody would stop."""
        server = connection(clock)
        with capture_logs() as logs:
            await asyncio.gather(*(server.tools() for _ in range(5)))
        assert server.starts == 1
        (started,) = [entry for entry in logs if entry["event"] == "mcp.server_started"]
        assert started["tools"] == len(await server.tools())
        assert (started["server"], started["transport"]) == ("toolbox", "stdio")
        pid = await pid_of(server)
        hung = asyncio.create_task(server.call("wait", {"seconds": 3600}))
        await clock.wait_for_sleepers()
        await server.close()
        await server.close()
        with pytest.raises(McpUnavailable, match="shut down"):
            await hung
        assert not alive(pid)
        assert not server.alive
        with pytest.raises(McpUnavailable, match="shut down"):
            await server.call("echo", {"text": "x"})
