"""Prompt size over a long session, with compaction and without, in one run.

Run with ``python3 tb.py bench compaction``. Nothing here asserts.

A 200-turn session (every turn a user message of about 60 tokens and an answer
of about 60, a tool call every third turn) is played by the scripted model over
a real SQLite log twice: once with an 8,192-token window (compaction on, the
defaults' proportions: reserve 1,024, keep 2,048), once with a window too large
ever to compact (the baseline: how the prompt grows without it). Tokens are the
bot's estimate (:mod:`core.agent.usage`), the same in both runs.

Figures: the largest prompt with compaction as a share of the window (target at
most 1.0), the same without, and the compaction's own cost per turn in tokens
(the summarisation calls' prompt and answer, spread over the 200 turns).
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402

from core.agent import Agent, AgentSettings, Tool, ToolContext, ToolRegistry  # noqa: E402
from core.agent.compaction import SUMMARY_SYSTEM, CompactionSettings  # noqa: E402
from core.agent.usage import ModelInfo, estimate_prompt  # noqa: E402
from core.logging import configure_logging, reset_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.providers.types import ChatMessage, ToolCall  # noqa: E402
from core.sessions.log import SessionLog  # noqa: E402
from core.store import open_database  # noqa: E402

TURNS = 200
WINDOW = 8_192
SETTINGS = CompactionSettings(reserve_tokens=1_024, keep_recent_tokens=2_048)
PADDING = "the quick brown fox jumps over the lazy dog " * 5
FACT = re.compile(r"FACT-\d+")


class NoArgs(BaseModel):
    pass


async def look(_args: NoArgs, _ctx: ToolContext) -> str:
    return "looked around: " + PADDING


def play(messages: list[ChatMessage]) -> Step:
    if messages and messages[0].content == SUMMARY_SYSTEM:
        facts = sorted(set(FACT.findall(messages[-1].content or "")), key=lambda f: int(f[5:]))
        return Step(text="The user asked to remember: " + ", ".join(facts))
    last = messages[-1]
    if last.role == "user":
        number = int(re.search(r"turn (\d+)", last.content or "").group(1))  # type: ignore[union-attr]
        if number % 3 == 0:
            return Step(tool_calls=(ToolCall(id=f"t{number}", name="look", arguments="{}"),))
    return Step(text="Noted. " + PADDING)


async def session(workdir: Path, name: str, window: int) -> tuple[list[int], list[int], int, float]:
    """Agent prompts, summarisation costs (tokens), compactions and seconds of one run."""
    db = await open_database(f"sqlite:///{workdir / f'{name}.db'}")
    log = SessionLog(db)
    tree = await log.load(f"bench:{name}")
    provider = ScriptedProvider(play, check_history=False)
    settings = AgentSettings(model_info=ModelInfo(context_window=window), compaction=SETTINGS)
    agent = Agent(
        tree, log, provider, ToolRegistry([Tool("look", "Look.", NoArgs, look)]), settings
    )
    start = time.perf_counter()
    for number in range(1, TURNS + 1):
        await agent.send(f"turn {number}: remember FACT-{number}. {PADDING}")
        await agent.wait_idle()
    elapsed = time.perf_counter() - start
    prompts, summaries = [], []
    for messages in provider.calls:
        tokens = estimate_prompt(list(messages))
        if messages[0].content == SUMMARY_SYSTEM:
            summaries.append(tokens)
        else:
            prompts.append(tokens)
    summary_answers = [
        e.payload["completion_tokens"]
        for e in agent.tree.events
        if e.type == "usage" and e.payload.get("purpose") == "compaction"
    ]
    compactions = sum(1 for e in agent.tree.events if e.type == "compaction")
    await db.close()
    return prompts, [*summaries, *summary_answers], compactions, elapsed


async def main() -> None:
    configure_logging(enabled=False)
    with tempfile.TemporaryDirectory(prefix="tb-bench-compaction-") as tmp:
        workdir = Path(tmp)
        with_prompts, costs, compactions, with_s = await session(workdir, "compacted", WINDOW)
        without_prompts, _, _, without_s = await session(workdir, "whole", 10_000_000)
    reset_logging()
    largest = max(with_prompts)
    share = largest / WINDOW
    met = "MET" if share <= 1.0 else "MISSED"
    print(f"\nPrompt tokens per turn over a {TURNS}-turn session (estimated tokens)")
    print(
        f"    with compaction (window {WINDOW:,}): largest {largest:,}, last {with_prompts[-1]:,}"
    )
    print(f"    largest prompt as a share of the window: {share:.2f}   target <= 1.0   {met}")
    print(
        f"    without compaction (baseline): largest {max(without_prompts):,} "
        f"({max(without_prompts) / WINDOW:.1f}x the window), last {without_prompts[-1]:,}"
    )
    print(
        f"    compaction's own cost: {sum(costs):,} tokens in {compactions} compactions, "
        f"{sum(costs) / TURNS:,.0f} tokens per turn"
    )
    print(f"    total prompt tokens: {sum(with_prompts):,} with, {sum(without_prompts):,} without")
    print(f"    wall time: {with_s:.2f} s with, {without_s:.2f} s without (scripted model)")


if __name__ == "__main__":
    asyncio.run(main())
