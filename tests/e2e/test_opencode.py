"""A real third-party ACP agent in a thread: OpenCode (``opencode acp``), end to end.

OpenCode speaks chat completions, so the tests' OpenAI-compatible server is its
model: a custom ``@ai-sdk/openai-compatible`` provider in an ``opencode.json`` at
the root of the agent's workspaces (OpenCode looks for its project config from
its working directory upwards), with ``bash`` and ``edit`` asking first.

OpenCode comes from the npm registry; ``.ci/run`` installs it and sets
``THREADBOUND_OPENCODE`` to its program, and ``THREADBOUND_REQUIRE_OPENCODE=1``
makes its absence a failure there. Elsewhere the test skips, saying why.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fakediscord.models import Message
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import ANNOUNCED, done, persona_messages, spawn, text_messages
from tests.fixtures.fake_llm import FakeLLM, Reply, chunk, text_reply, tool_delta

OPENCODE_WAIT = 120  # seconds: OpenCode's first start may fetch its provider package
COMMAND = "echo hello-from-bash"
ANSWER = "The command printed hello-from-bash."


def opencode_program() -> str:
    found = os.environ.get("THREADBOUND_OPENCODE") or shutil.which("opencode")
    if found:
        return found
    why = "OpenCode is not installed (npm install opencode-ai; .ci/run does)"
    if os.environ.get("THREADBOUND_REQUIRE_OPENCODE") == "1":
        pytest.fail(why)
    print(f"skipping: {why}")
    pytest.skip(why)


def answer(body: Any) -> Reply:
    """The model: asks for one ``bash`` call, then answers once its output is in.

    OpenCode also asks, on the side, for a title (a request without tools).
    """
    if not body.get("tools"):
        return text_reply("Running echo")
    if any(m.get("role") == "tool" for m in body["messages"]):
        return text_reply(ANSWER, usage={"prompt_tokens": 40, "completion_tokens": 7})
    call = tool_delta(
        0,
        id="call_1",
        name="bash",
        arguments=json.dumps({"command": COMMAND, "description": "Print a greeting"}),
    )
    return Reply(
        chunks=[
            chunk({"role": "assistant", "content": ""}),
            chunk({"tool_calls": [call]}),
            chunk({}, finish_reason="tool_calls"),
        ]
    )


def opencode_config(base_url: str) -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Tests' model",
                "options": {"baseURL": base_url, "apiKey": "not-a-secret"},
                "models": {"scripted": {"name": "Scripted"}},
            }
        },
        "model": "fake/scripted",
        "small_model": "fake/scripted",
        "permission": {"bash": "ask", "edit": "ask"},
        "autoupdate": False,
        "share": "disabled",
    }


def buttons(message: Message) -> list[dict[str, Any]]:
    return [item for row in message.components for item in row.get("components") or ()]


async def shown(bot: Bot, thread: int, wanted: Callable[[Message], bool]) -> Message:
    """The first message in ``thread`` that is ``wanted``, waiting as long as OpenCode may
    take (the fake Discord's own waits are shorter); on a timeout, what the thread and
    OpenCode's stderr said."""

    def probe() -> Message | None:
        return next((m for m in bot.fake.messages_in(thread) if wanted(m)), None)

    try:
        async with asyncio.timeout(OPENCODE_WAIT):
            return await bot.fake.state.changed.wait_for(probe)
    except TimeoutError:
        said = "\n".join(m.content for m in bot.fake.messages_in(thread))
        logs = bot.services.config.acp_workspace_root("opencode") / ".logs"
        stderr = "\n".join(p.read_text(errors="replace")[-3000:] for p in logs.glob("*.log"))
        raise AssertionError(f"thread:\n{said}\n\nOpenCode's stderr:\n{stderr}") from None


async def opencode_bot(start_bot: StartBot, tmp_path: Path, llm: FakeLLM) -> Bot:
    """A bot whose agent ``coder`` is OpenCode, with ``llm`` as OpenCode's model."""
    program = opencode_program()
    home = tmp_path / "home"
    home.mkdir()
    workspaces = tmp_path / "acp-workspaces"
    workspaces.mkdir()
    (workspaces / "opencode.json").write_text(json.dumps(opencode_config(llm.base_url)))
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
    }
    return await start_bot(
        agents={"coder": {"display_name": "Coder", "acp": "opencode"}},
        acp_agents={
            "opencode": {
                "command": [program, "acp"],
                "env_from": {
                    "OPENCODE_DISABLE_AUTOUPDATE": "OPENCODE_DISABLE_AUTOUPDATE",
                    "OPENCODE_DISABLE_MODELS_FETCH": "OPENCODE_DISABLE_MODELS_FETCH",
                },
                "start_timeout_seconds": OPENCODE_WAIT,
            }
        },
        env=env,
    )


async def test_opencode_asks_runs_bash_after_allow_and_completes(
    start_bot: StartBot, tmp_path: Path
) -> None:
    async with FakeLLM(answer=answer) as llm:
        bot = await opencode_bot(start_bot, tmp_path, llm)
        await spawn(bot, "say hello with bash", mode="run", agent="coder")
        thread = int(bot.binding().conversation.conversation_id)

        asking = await shown(bot, thread, lambda m: any(b.get("label") for b in buttons(m)))
        labels = [b["label"] for b in buttons(asking)]
        assert "Allow once" in labels, labels
        assert "echo hello-from-bash" in asking.content
        (allow,) = [b["custom_id"] for b in buttons(asking) if b["label"] == "Allow once"]
        handle = await bot.fake.click_button(asking, allow, bot.world.alice)
        async with asyncio.timeout(OPENCODE_WAIT):
            await handle.wait_response()
        await shown(bot, thread, lambda m: ANNOUNCED in m.content)
        await done(bot)

        spoken = "\n".join(m.content for m in persona_messages(bot.fake, thread))
        (line,) = [x for x in spoken.splitlines() if "🔧" in x]
        assert "echo hello-from-bash" in line
        assert "✅ ok → hello-from-bash" in line  # the command's output, in its line
        assert ANSWER in spoken
        said = [m.content for m in text_messages(bot.fake, thread)]
        assert [c for c in said if ANNOUNCED in c] == ["✅ **Coder** completed its task."]
        answered = bot.fake.message(asking.id)
        assert buttons(answered) == []
        assert "“Allow once”, chosen by alice" in answered.content
        tool_results = [
            m
            for r in llm.requests
            if isinstance(r.json, dict)
            for m in r.json.get("messages", [])
            if m.get("role") == "tool"
        ]
        assert any("hello-from-bash" in str(m.get("content")) for m in tool_results)


async def test_opencode_gets_the_bots_note_apart_from_the_persons_words(
    start_bot: StartBot, tmp_path: Path
) -> None:
    """A second person writes: the bot's note saying who wrote reaches OpenCode's model
    as a text part of its own, and the person's words as theirs, exactly."""
    words = "bob here: count the files"
    async with FakeLLM(answer=lambda _: text_reply("Noted.")) as llm:
        bot = await opencode_bot(start_bot, tmp_path, llm)
        await spawn(bot, "hello", mode="session", agent="coder")
        thread = int(bot.binding().conversation.conversation_id)
        await shown(bot, thread, lambda m: "Noted." in m.content)
        bob = bot.fake.add_member(bot.world.guild, "bob")
        said = await bot.fake.user_says(thread, bob, words)
        await shown(bot, thread, lambda m: m.id > said.id and "Noted." in m.content)

        asked = [  # the last user message of each of the model's turns (not its titles)
            r.json["messages"][-1]
            for r in llm.requests
            if isinstance(r.json, dict) and r.json.get("tools")
        ]
        parts = asked[-1]["content"]
        assert isinstance(parts, list), parts
        texts = [p.get("text") for p in parts if p.get("type") == "text"]
        assert "(threadbound, the chat bridge: the next block is bob's message.)" in texts
        assert words in texts  # the person's words, a part of their own
