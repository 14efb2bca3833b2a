"""When a turn keeps calling the model, and when it must stop.

Two separate questions. The continuation hook asks "is there more to do?"
(default: the model asked for tools, or a steering message was injected) and
is where goal or loop policies plug in. The stop policy asks "may we go on?"
(steps per turn, a token and cost budget per session) and always wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "BudgetExceeded",
    "ContinuationHook",
    "StepInfo",
    "StopPolicy",
    "default_should_continue",
]


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What one model step did, for the continuation hook."""

    step: int
    had_tool_calls: bool
    steering_injected: bool
    text: str


ContinuationHook = Callable[[StepInfo], bool]


def default_should_continue(step: StepInfo) -> bool:
    """Call the model again if it asked for tools or the user steered mid-turn."""
    return step.had_tool_calls or step.steering_injected


@dataclass(frozen=True, slots=True)
class BudgetExceeded:
    limit: str
    used: float


@dataclass(frozen=True, slots=True)
class StopPolicy:
    """Hard limits. ``None`` means no limit."""

    max_steps_per_turn: int = 25
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    def budget_exceeded(self, total_tokens: int, cost_usd: float) -> BudgetExceeded | None:
        if self.max_total_tokens is not None and total_tokens >= self.max_total_tokens:
            return BudgetExceeded(f"max_total_tokens={self.max_total_tokens}", total_tokens)
        if self.max_cost_usd is not None and cost_usd >= self.max_cost_usd:
            return BudgetExceeded(f"max_cost_usd={self.max_cost_usd}", cost_usd)
        return None
