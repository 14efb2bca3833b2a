"""Counting tokens when the server reports none, and pricing them."""

from __future__ import annotations

from core.agent.usage import ModelInfo, estimate_prompt, estimate_text, priced
from core.config import ProviderConfig
from core.providers.types import ChatMessage, ToolCall, ToolSpec, Usage


def test_four_characters_a_token_rounded_up() -> None:
    assert [estimate_text(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


def test_a_prompt_counts_messages_calls_and_tool_schemas() -> None:
    call = ToolCall(id="c1", name="look", arguments='{"q": "x"}')  # 4 + 10 chars
    messages = [
        ChatMessage(role="user", content="a" * 40),  # 4 + 10
        ChatMessage(role="assistant", content="", tool_calls=(call,)),  # 4 + 1 + 3
    ]
    assert estimate_prompt(messages) == 14 + 8
    tool = ToolSpec(name="look", description="Look.", parameters={"type": "object"})
    assert estimate_prompt(messages, [tool]) == 22 + 1 + 2 + 5  # name, description, schema


def test_cost_is_the_providers_else_from_the_prices() -> None:
    usage = Usage(prompt_tokens=2_000_000, completion_tokens=500_000)
    priced_info = ModelInfo(input_usd_per_mtok=0.15, output_usd_per_mtok=0.6)
    assert priced(usage, priced_info) == 0.3 + 0.3
    assert priced(usage, ModelInfo()) is None
    reported = usage.model_copy(update={"cost_usd": 0.01})
    assert priced(reported, priced_info) == 0.01


def test_model_info_from_the_provider_table() -> None:
    config = ProviderConfig(
        base_url="http://127.0.0.1:1/v1",
        model="m",
        context_window=8192,
        input_usd_per_mtok=1.0,
        output_usd_per_mtok=2.0,
        vision=True,
    )
    assert ModelInfo.of(config) == ModelInfo(8192, 1.0, 2.0, True)
    assert ModelInfo().context_window == 32_768
