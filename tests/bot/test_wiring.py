"""Wiring: services built from config, and a shutdown that loses no activity."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.wiring import build_services
from core.bindings.records import ConversationRef
from core.clock import FakeClock
from core.config import Config, load_config, parse_config
from core.leases import Leases
from core.providers.scripted import ScriptedProvider
from core.store import open_database
from tests.core.mcp.helpers import TOOLBOX


def config_for(tmp_path: Path) -> Config:
    return parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
            "channels": {"discord": {"threadBindings": {"idleHours": 2, "maxAgeHours": 6}}},
        },
        config_path=tmp_path / "config.toml",
        env={},
    )


async def test_bindings_use_configured_lifetimes(tmp_path: Path) -> None:
    """A new binding gets the idle timeout and max age resolved from the flags."""
    services = await build_services(config_for(tmp_path), clock=FakeClock())
    try:
        record = await services.bindings.bind(
            "agent:1",
            "subagent",
            ConversationRef(channel="discord", account_id="default", conversation_id="t1"),
        )
    finally:
        await services.close()
    assert (record.idle_timeout_ms, record.max_age_ms) == (2 * 3_600_000, 6 * 3_600_000)


async def test_close_flushes_touches(tmp_path: Path) -> None:
    """Activity touched just before shutdown is in the store after a restart."""
    clock = FakeClock()
    services = await build_services(config_for(tmp_path), clock=clock)
    ref = ConversationRef(channel="discord", account_id="default", conversation_id="t1")
    record = await services.bindings.bind("agent:1", "subagent", ref)
    await clock.advance(60)
    services.bindings.touch(record.binding_id)
    await services.close()

    restarted = await build_services(config_for(tmp_path), clock=clock)
    try:
        assert restarted.bindings.get(record.binding_id).last_activity_at == clock.now()
        resolution = restarted.router.resolve_destination(
            target_session_key="agent:1", requester=ref
        )
        assert (resolution.mode, resolution.reason) == ("bound", "requester-match")
    finally:
        await restarted.close()


async def test_thread_message_reaches_a_real_model_over_http(tmp_path: Path) -> None:
    """A message in a bound conversation is answered by the configured provider, over HTTP."""
    from tests.fixtures.fake_llm import FakeLLM, text_reply

    async with FakeLLM([text_reply("Hello ", "from the model")]) as llm:
        config = parse_config(
            {
                "store": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
                "providers": {"local": {"base_url": llm.base_url, "model": "tiny"}},
            },
            config_path=tmp_path / "config.toml",
            env={},
        )
        services = await build_services(config, clock=FakeClock(), env={})
        try:
            ref = ConversationRef(channel="discord", account_id="default", conversation_id="t1")
            await services.bindings.bind("agent:1", "session", ref)
            result = await services.inbound.handle(ref, "hi there", author_id="u1")
            assert result is not None
            agent = await services.runtime.get("agent:1")
            await agent.wait_idle()
            answers = [
                e.payload["text"] for e in agent.tree.events if e.type == "assistant_message"
            ]
            assert answers == ["Hello from the model"]
            sent = llm.requests[0].json
            assert sent["model"] == "tiny"
            assert sent["messages"][-1] == {"role": "user", "content": "hi there"}
        finally:
            await services.close()


async def test_without_a_provider_the_turn_says_what_to_configure(tmp_path: Path) -> None:
    """No [providers] table: the turn ends in-band with an error naming the fix."""
    services = await build_services(config_for(tmp_path), clock=FakeClock(), env={})
    try:
        agent = await services.runtime.get("agent:1")
        await agent.send("hello?")
        await agent.wait_idle()
        ended = [e.payload for e in agent.tree.events if e.type == "turn_ended"]
        assert ended[0]["reason"] == "error"
        assert "add a [providers.<name>] table" in ended[0]["error"]
    finally:
        await services.close()


async def test_maintenance_evicts_idle_agents(tmp_path: Path) -> None:
    """The running bot's upkeep drops agents idle past [agent] idle_evict_seconds."""
    clock = FakeClock()
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
            "agent": {"idle_evict_seconds": 120},
        },
        config_path=tmp_path / "config.toml",
        env={},
    )
    services = await build_services(config, clock=clock, provider=ScriptedProvider([]))
    try:
        await services.runtime.get("idle-session")
        upkeep = asyncio.ensure_future(services.maintain())
        for _ in range(2):  # two eviction passes: at 60 s still fresh, at 120 s idle long enough
            await clock.wait_for_sleepers(2)  # the bindings' upkeep and the eviction loop
            await clock.advance(60)
        await clock.wait_for_sleepers(2)  # the eviction pass at 120 s has run
        assert services.runtime.resident() == []
        upkeep.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await upkeep
    finally:
        await services.close()


async def test_pick_up_takes_over_a_dead_predecessors_sessions(tmp_path: Path) -> None:
    """A restarted bot (the SQLite process lock held) takes the leases its killed
    predecessor left at once, and keeps the sessions among them for their pick-up."""
    clock = FakeClock()
    config = config_for(tmp_path)
    previous = await open_database(config.store_url())
    predecessor = Leases(previous, owner="killed", clock=clock)
    await predecessor.take("session", "agent:1")
    await predecessor.take("completion", "c1")
    await previous.close()  # killed: nothing released, the leases still run

    services = await build_services(
        config, clock=clock, provider=ScriptedProvider([]), single_process=True
    )
    try:
        await services.pick_up()
        assert services.taken_over_sessions == ["agent:1"]
        assert await services.runtime.get("agent:1") is not None  # no SessionBusy
    finally:
        await services.close()


async def test_relative_paths_in_the_config_file_resolve_next_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--config etc/config.toml`` run from elsewhere: the store, the attachments and an MCP
    server's relative command are all found in etc/, not in the directory the bot started in."""
    etc = tmp_path / "etc"
    (etc / "tools").mkdir(parents=True)
    shutil.copy(TOOLBOX, etc / "tools" / "toolbox.py")
    (etc / "config.toml").write_text(
        '[store]\nurl = "sqlite:///data/bot.db"\nattachments_dir = "files"\n'
        '[mcp_servers.local]\ncommand = ["python", "tools/toolbox.py"]\n'
        '[agent]\ntools = ["mcp:local/echo"]\n'
    )
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)  # a tools/ or data/ here would be the wrong one
    config = load_config(Path("etc/config.toml"), env={})
    (etc / "data").mkdir()

    services = await build_services(config, clock=FakeClock(), env={})
    try:
        assert services.mcp.connection("local").alive  # started by the start-up check
        assert (etc / "data" / "bot.db").exists()
        assert not (tmp_path / "data" / "bot.db").exists()
        assert config.attachments_path() == etc / "files"
    finally:
        await services.close()


SDK_MODULES_AFTER_A_TURN = """
import asyncio, json, sys
from pathlib import Path

import bot.client  # what `python -m bot` imports besides the wiring
from bot.wiring import build_services
from core.config import load_config
from core.providers.scripted import ScriptedProvider, Step


async def main(config_path: str) -> None:
    config = load_config(Path(config_path), env={})
    services = await build_services(config, env={}, provider=ScriptedProvider([Step("hi")]))
    try:
        agent = await services.runtime.get("agent:1")
        await agent.send("hello")
        await agent.wait_idle()
    finally:
        await services.close()
    sdks = ("mcp", "mcp_types", "acp")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in sdks)
    print(json.dumps(loaded))


asyncio.run(main(sys.argv[1]))
"""


def sdk_modules_after_a_turn(config_path: Path) -> list[str]:
    """The ``mcp`` and ACP SDK modules a fresh bot process holds after start-up and one turn.

    A subprocess, so what this test process imported (the MCP tests' own) does not count.
    """
    done = subprocess.run(
        [sys.executable, "-c", SDK_MODULES_AFTER_A_TURN, str(config_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_without_mcp_servers_or_acp_agents_no_sdk_is_imported(tmp_path: Path) -> None:
    """No [mcp_servers] or [acp_agents] table: the mcp SDK (tens of MiB of imports) and
    the ACP SDK (about 8 MiB) stay out (issue 26)."""
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "bot.db"}"\n')
    assert sdk_modules_after_a_turn(config) == []


def test_a_server_in_use_imports_the_sdk(tmp_path: Path) -> None:
    """The same check sees the SDK once a configured server's tools are offered."""
    shutil.copy(TOOLBOX, tmp_path / "toolbox.py")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "bot.db"}"\n'
        '[mcp_servers.local]\ncommand = ["python", "toolbox.py"]\n'
        '[agent]\ntools = ["mcp:local"]\n'
    )
    loaded = sdk_modules_after_a_turn(config)
    assert "mcp" in loaded
    assert "mcp_types" in loaded
