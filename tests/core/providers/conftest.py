"""Fixtures for provider tests: the fake server and providers pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.providers import OpenAICompatibleProvider
from tests.fixtures.fake_llm import FakeLLM
from tests.fixtures.providers import MakeProvider


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    """The retry delays the providers asked for, in order."""
    return []


@pytest.fixture
async def make_provider(llm: FakeLLM, sleeps: list[float]) -> AsyncIterator[MakeProvider]:
    """Providers pointed at the fake server whose retry waits are recorded, not slept."""
    made: list[OpenAICompatibleProvider] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    def make(**options: Any) -> OpenAICompatibleProvider:
        settings: dict[str, Any] = {
            "base_url": llm.base_url,
            "model": "test-model",
            "sleep": record_sleep,
            "jitter": False,
        }
        provider = OpenAICompatibleProvider(**{**settings, **options})
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()
