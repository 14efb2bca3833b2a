"""Wiring: services built from config, and a shutdown that loses no activity."""

from __future__ import annotations

from pathlib import Path

from bot.wiring import build_services
from core.bindings.records import ConversationRef
from core.clock import FakeClock
from core.config import Config, parse_config


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
