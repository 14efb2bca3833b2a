"""The tool registry: validated arguments, failures as results, cancellation passes through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pydantic import BaseModel

from core.agent.builtin_tools import http_get_tool, sleep_tool
from core.agent.tools import Tool, ToolContext, ToolFailed, ToolRegistry
from core.agent.usage import estimate_tools
from core.clock import FakeClock
from tests.fixtures.agents import call

CTX = ToolContext(session_key="s", turn_id="t", tool_call_id="c1")


class EchoArgs(BaseModel):
    text: str
    times: int = 1


async def echo(args: EchoArgs, _ctx: ToolContext) -> str:
    return args.text * args.times


async def boom(_args: EchoArgs, _ctx: ToolContext) -> str:
    raise RuntimeError("disk on fire")


async def forever(_args: EchoArgs, _ctx: ToolContext) -> str:
    await asyncio.Event().wait()
    return "never"


def registry(*tools: Tool) -> ToolRegistry:
    return ToolRegistry([Tool("echo", "Echo.", EchoArgs, echo), *tools])


class TestRegistry:
    async def test_runs_with_validated_arguments(self) -> None:
        """Arguments are parsed and validated before the function sees them."""
        outcome = await registry().execute(call("c1", "echo", text="ab", times=2), CTX)
        assert (outcome.content, outcome.is_error) == ("abab", False)

    @pytest.mark.parametrize(
        ("name", "arguments", "message"),
        [
            ("nope", "{}", "unknown tool 'nope' (available: echo)"),
            ("echo", "{not json", "arguments are not valid JSON"),
            ("echo", '{"times": 2}', "invalid arguments for echo: text: Field required"),
        ],
    )
    async def test_bad_calls_become_error_results(
        self, name: str, arguments: str, message: str
    ) -> None:
        """Unknown tools and bad arguments are told to the model, not raised."""
        from core.providers.types import ToolCall

        outcome = await registry().execute(ToolCall(id="c", name=name, arguments=arguments), CTX)
        assert outcome.is_error
        assert message in outcome.content

    async def test_exception_becomes_error_result(self) -> None:
        """A failing tool yields an error result naming the failure."""
        reg = registry(Tool("boom", "Fails.", EchoArgs, boom))
        outcome = await reg.execute(call("c1", "boom", text="x"), CTX)
        assert outcome.is_error
        assert "boom failed: RuntimeError: disk on fire" in outcome.content

    async def test_timeout_becomes_error_result(self) -> None:
        """A call past its timeout is stopped and reported."""
        reg = registry(Tool("slow", "Slow.", EchoArgs, forever, timeout_s=0))
        outcome = await reg.execute(call("c1", "slow", text="x"), CTX)
        assert outcome.is_error
        assert "slow timed out after 0s" in outcome.content

    async def test_cancellation_propagates(self) -> None:
        """Cancelling the caller cancels the tool instead of becoming a result."""
        reg = registry(Tool("slow", "Slow.", EchoArgs, forever))
        task = asyncio.create_task(reg.execute(call("c1", "slow", text="x"), CTX))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    def test_specs_and_subset(self) -> None:
        """Specs carry the JSON schema; a subset names only known tools."""
        reg = registry(Tool("boom", "Fails.", EchoArgs, boom))
        spec = reg.subset(["echo"]).specs()
        assert [s.name for s in spec] == ["echo"]
        assert spec[0].parameters["required"] == ["text"]
        with pytest.raises(Exception, match="unknown tool"):
            reg.subset(["missing"])


class TestBuiltins:
    async def test_sleep_waits_on_the_clock(self) -> None:
        """sleep finishes when its clock has advanced, not before."""
        clock = FakeClock()
        reg = ToolRegistry([sleep_tool(clock)])
        task = asyncio.create_task(reg.execute(call("c1", "sleep", seconds=3), CTX))
        await clock.wait_for_sleepers()
        assert not task.done()
        await clock.advance(3)
        assert (await task).content == "slept 3s"

    @pytest.fixture
    async def local_site(self) -> AsyncIterator[str]:
        async def hello(_request: web.Request) -> web.Response:
            return web.Response(text="hello from loopback")

        app = web.Application()
        app.router.add_get("/hello", hello)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
        await runner.cleanup()

    async def test_http_get_allowed_host(self, local_site: str) -> None:
        """An allowed host is fetched, with the status in the result."""
        reg = ToolRegistry([http_get_tool(["127.0.0.1"])])
        outcome = await reg.execute(call("c1", "http_get", url=f"{local_site}/hello"), CTX)
        assert not outcome.is_error
        assert outcome.content == "HTTP 200\nhello from loopback"

    async def test_http_get_refuses_other_hosts(self, local_site: str) -> None:
        """A host off the allow-list is refused before any request is made."""
        reg = ToolRegistry([http_get_tool(["*.example.org"])])
        outcome = await reg.execute(call("c1", "http_get", url=f"{local_site}/hello"), CTX)
        assert outcome.is_error
        assert "not on the http_get allow-list (*.example.org)" in outcome.content


class _Source:
    """A tool source whose tools a test changes between refreshes."""

    def __init__(self) -> None:
        self.current: tuple[Tool, ...] = (Tool("a", "A.", None, echo),)

    async def tools(self) -> tuple[Tool, ...]:
        return self.current


class TestResultsAndSources:
    async def test_a_long_result_is_cut_with_a_marker_saying_how_long_it_was(self) -> None:
        reg = ToolRegistry([Tool("echo", "Echo.", EchoArgs, echo)], result_max_chars=1000)
        outcome = await reg.execute(call("c1", "echo", text="ab", times=1500), CTX)
        assert outcome.content.startswith("ab" * 500)
        assert outcome.content.endswith(
            "[cut: the result had 3,000 characters; the first 1,000 are shown]"
        )

    async def test_a_tool_failure_carries_its_notice(self) -> None:
        async def down(_args: dict, _ctx: ToolContext) -> str:
            raise ToolFailed("server clock is not running", notice="🔌 clock is down")

        reg = ToolRegistry([Tool("probe", "Probe.", None, down)])
        outcome = await reg.execute(call("c1", "probe"), CTX)
        assert (outcome.content, outcome.is_error, outcome.notice) == (
            "error: server clock is not running",
            True,
            "🔌 clock is down",
        )

    async def test_a_schema_tool_takes_a_json_object_and_offers_its_schema(self) -> None:
        async def show(args: dict, _ctx: ToolContext) -> str:
            return repr(sorted(args.items()))

        schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
        reg = ToolRegistry([Tool("show", "Show.", None, show, parameters=schema)])
        assert reg.specs()[0].parameters == schema
        assert (await reg.execute(call("c1", "show", x=1), CTX)).content == "[('x', 1)]"
        from core.providers.types import ToolCall

        not_object = ToolCall(id="c2", name="show", arguments="[1, 2]")
        outcome = await reg.execute(not_object, CTX)
        assert outcome.is_error
        assert "must be a JSON object" in outcome.content

    async def test_sources_are_taken_in_at_refresh_and_specs_rebuilt_only_on_change(
        self,
    ) -> None:
        source = _Source()
        reg = ToolRegistry([Tool("echo", "Echo.", EchoArgs, echo)], sources=[source])
        assert reg.names() == ["echo"]
        await reg.refresh()
        assert reg.names() == ["echo", "a"]
        specs = reg.specs()
        await reg.refresh()
        assert reg.specs() is specs  # the same tuple: nothing rebuilt
        source.current = (Tool("b", "B.", None, echo), Tool("echo", "Shadow.", None, echo))
        await reg.refresh()
        assert reg.names() == ["echo", "b"]  # a fixed tool wins a clash
        assert reg.get("echo") is not None
        assert reg.get("echo").description == "Echo."

    async def test_spec_tokens_follow_the_tools_without_reserialising(self) -> None:
        """The schemas' estimate is kept until the tools change, then taken again."""

        source = _Source()
        reg = ToolRegistry([Tool("echo", "Echo.", EchoArgs, echo)], sources=[source])
        assert reg.spec_tokens() == estimate_tools(reg.specs())
        await reg.refresh()
        assert reg.spec_tokens() == estimate_tools(reg.specs())
        before = reg.spec_tokens()
        source.current = (Tool("b", "B." * 50, None, echo),)
        await reg.refresh()
        assert reg.spec_tokens() == estimate_tools(reg.specs()) > before
        reg.register(Tool("late", "Late.", EchoArgs, echo))
        assert reg.spec_tokens() == estimate_tools(reg.specs())
