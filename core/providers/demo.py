"""A demo model for the playground: no network, no key, clearly labelled as fake.

Without a ``[providers.<name>]`` table there is no real model to talk to, yet the
playground should show what the product does: text streaming under a persona,
a tool that takes a while (so there is time to steer or queue a follow-up), a
steer that visibly changes course, and a final answer. This provider plays that
script from the conversation alone, so it is stateless and deterministic:

- each turn works in ``steps`` steps; every step streams a short line of text in
  small chunks and then calls the ``sleep`` tool for ``sleep_seconds``;
- when the playground's demo MCP server is offered, the turn first calls one of
  its tools: ``…__write_note`` when the task mentions a note (a call that needs
  approval, so the buttons show), else ``…__roll_dice``; the sleeping steps follow;
- a steering message (the loop renders it as ``<steering …>text</steering>``) is
  acknowledged in the next step's text: "changing course";
- after ``steps`` tool results the turn ends with a final answer that quotes the
  task and every steer, so a reader can tell the steer was taken into account, and
  what each demo tool answered, or that a call was denied and not run;
  it names every file the turn's messages carried (a text file by its lines, an
  image by its type and size), so an upload can be seen to reach the model, and
  when the task asks for code it answers with a small markdown sample (a heading,
  a list, a fenced block) to show how the thread renders one.

Every piece of text starts with :data:`LABEL` so nobody mistakes it for a model.
It knows nothing about Discord: the playground passes it to ``build_services``.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import re
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from core.providers.types import (
    ChatMessage,
    ProviderEvent,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
)

__all__ = ["LABEL", "DemoPlan", "DemoProvider", "plan_reply"]

LABEL = "[demo model]"
"""The prefix of everything the demo model says."""

_STEERING = re.compile(r"^<steering[^>]*>(?P<text>.*)</steering>$", re.DOTALL)
_ATTACHMENT = re.compile(
    r'<attachment name="(?P<name>[^"]*)">\n?(?P<body>.*?)\n?</attachment>', re.DOTALL
)
_IMAGE_MARK = re.compile(r"^\[image (?P<number>\d+)\]$")
CODE_SAMPLE = """\
### A sample, as asked
- a heading, this list and a fenced block:
```python
def fizzbuzz(n: int) -> str:
    return "Fizz" * (n % 3 == 0) + "Buzz" * (n % 5 == 0) or str(n)
```"""
_QUOTE_MAX = 160


def _quote(text: str) -> str:
    """One line of ``text``, shortened, in quotes: enough to recognise it."""
    line = " ".join(text.split())
    if len(line) > _QUOTE_MAX:
        line = line[: _QUOTE_MAX - 1] + "…"
    return f"“{line}”"


def _steering_text(message: ChatMessage) -> str | None:
    """The text of a steering message, or None for an ordinary user message."""
    match = _STEERING.match((message.content or "").strip())
    return match.group("text") if match else None


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """What the next model call answers: text, and whether it calls ``sleep``."""

    text: str
    sleep: bool
    step: int
    """1-based step of the turn; ``steps + 1`` for the final answer."""
    tool: str | None = None
    """Another tool to call instead of ``sleep`` (the demo MCP server's)."""
    arguments: str = "{}"


def _without_attachments(text: str) -> str:
    return _ATTACHMENT.sub("", text).strip()


def _files_seen(message: ChatMessage) -> list[str]:
    """What the model was given besides text: each attached file, described."""
    seen = []
    for match in _ATTACHMENT.finditer(message.content or ""):
        name, body = html.unescape(match.group("name")), match.group("body")
        image = _IMAGE_MARK.match(body.strip())
        if image is not None and int(image.group("number")) <= len(message.images):
            part = message.images[int(image.group("number")) - 1]
            size = len(base64.b64decode(part.data_base64))
            seen.append(f"`{name}` (an image, {part.mime}, {size} bytes)")
        elif image is None:
            lines = len(body.splitlines())
            seen.append(f"`{name}` ({lines} line{'s' if lines != 1 else ''} of text)")
    return seen


_NOT_RUN = ("denied", "not run")
"""How the loop's result for a call that did not get approval begins."""


def _tool_outcomes(turn: Sequence[ChatMessage]) -> list[str]:
    """A sentence per demo tool call of the turn: what it answered, or that it was not run."""
    said = []
    for message in turn:
        if message.role != "tool" or message.name in (None, "sleep"):
            continue
        result = _quote(message.content or "")
        if (message.content or "").startswith(_NOT_RUN):
            said.append(f"My call to `{message.name}` was not run ({result}), so I left it out.")
        else:
            said.append(f"`{message.name}` answered {result}.")
    return said


def _offered(tools: frozenset[str], suffix: str) -> str | None:
    return next((name for name in sorted(tools) if name.endswith(suffix)), None)


def _current_turn(messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """Messages of the running turn: from the people's words that opened it.

    A turn opens with one or more plain user messages (the task, a follow-up);
    a steer inside it comes wrapped in ``<steering>``. Counting from the last
    final answer instead would carry over the steps of a turn a restart cut
    off (it has no final answer) into the next one.
    """
    start = None
    for index in range(len(messages) - 1, -1, -1):
        if _opens_turn(messages[index]):
            start = index
            while start > 0 and _opens_turn(messages[start - 1]):
                start -= 1
            break
    if start is None:  # no words of a person at all: everything is this turn
        return messages
    return messages[start:]


def _opens_turn(message: ChatMessage) -> bool:
    return message.role == "user" and _steering_text(message) is None


def plan_reply(
    messages: Sequence[ChatMessage],
    *,
    steps: int,
    can_sleep: bool,
    tools: frozenset[str] = frozenset(),
) -> DemoPlan:
    """Decide the next answer from the conversation alone (pure, for tests)."""
    turn = _current_turn(messages)
    # Only sleeping steps count: a demo tool call comes before them and keeps the time to
    # steer that the sleeping steps give.
    done = sum(1 for m in turn if m.role == "tool" and m.name in (None, "sleep"))
    used_tools = any(m.role == "tool" and m.name not in (None, "sleep") for m in turn)
    asks = [
        _without_attachments(m.content or "")
        for m in turn
        if m.role == "user" and _steering_text(m) is None
    ]
    files = [f for m in turn if m.role == "user" for f in _files_seen(m)]
    steers = [t for m in turn if m.role == "user" and (t := _steering_text(m)) is not None]
    last = next((m for m in reversed(turn) if m.role != "tool"), None)
    fresh_steer = last is not None and last.role == "user" and _steering_text(last) is not None
    task = _quote(asks[-1]) if asks and asks[-1] else "the task"

    if done >= steps or not can_sleep:
        lines = [f"{LABEL} Final answer for {task}:"]
        if steers:
            lines.append("I changed course as you steered: " + "; then ".join(map(_quote, steers)))
            lines.append(f"so this answer follows {_quote(steers[-1])}.")
        else:
            lines.append(f"worked through {done} step{'s' if done != 1 else ''} and finished.")
        lines += _tool_outcomes(turn)
        if files:
            lines.append("Files I was given: " + ", ".join(files) + ".")
        if "code" in (asks[-1] if asks else "").lower():
            lines.append(CODE_SAMPLE)
        lines.append("(This is the built-in demo model; configure [providers] for a real one.)")
        return DemoPlan(text="\n".join(lines), sleep=False, step=steps + 1)

    step = done + 1
    if fresh_steer:
        text = f"{LABEL} Steering received: changing course to {_quote(steers[-1])}. "
    elif step == 1 and not used_tools:
        text = f"{LABEL} Working on {task}. "
    else:
        text = f"{LABEL} Continuing. "
    if step == 1 and not fresh_steer and not used_tools:
        wanted = asks[-1] if asks else ""
        note = _offered(tools, "__write_note") if "note" in wanted.lower() else None
        dice = _offered(tools, "__roll_dice")
        if note is not None:
            arguments = json.dumps({"text": " ".join(wanted.split())[:200]})
            return DemoPlan(text + "First, writing that down.", False, step, note, arguments)
        if dice is not None:
            arguments = json.dumps({"sides": 20})
            return DemoPlan(text + "First, rolling a die.", False, step, dice, arguments)
    text += f"Step {step}/{steps}: thinking for a moment…"
    return DemoPlan(text=text, sleep=True, step=step)


class DemoProvider:
    """A :class:`~core.providers.types.Provider` that plays :func:`plan_reply`.

    Args:
        sleep_seconds: what each step asks the ``sleep`` tool to wait.
        steps: sleeping steps per turn before the final answer.
        chunk_chars: characters per streamed text piece.
        chunk_delay: seconds between pieces, so streaming is visible (0 in unit tests).
    """

    def __init__(
        self,
        *,
        sleep_seconds: float = 3.0,
        steps: int = 3,
        chunk_chars: int = 8,
        chunk_delay: float = 0.08,
        name: str = "demo",
    ) -> None:
        if steps < 1:
            raise ValueError(f"steps must be at least 1, not {steps}")
        if sleep_seconds <= 0:
            raise ValueError(f"sleep_seconds must be positive, not {sleep_seconds}")
        self._name = name
        self.sleep_seconds = sleep_seconds
        self.steps = steps
        self.chunk_chars = max(1, chunk_chars)
        self.chunk_delay = max(0.0, chunk_delay)
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Stream the planned text in chunks, then the ``sleep`` call if the plan has one."""
        self.calls += 1
        names = frozenset(tool.name for tool in tools)
        plan = plan_reply(messages, steps=self.steps, can_sleep="sleep" in names, tools=names)
        for start in range(0, len(plan.text), self.chunk_chars):
            yield TextDelta(text=plan.text[start : start + self.chunk_chars])
            await asyncio.sleep(self.chunk_delay)
        # No usage: the demo has no tokenizer, so the bot estimates both counts and
        # marks them estimated, as for any server that reports none.
        if plan.sleep or plan.tool is not None:
            name, arguments = plan.tool or "sleep", plan.arguments
            if plan.tool is None:
                arguments = json.dumps({"seconds": self.sleep_seconds})
            call = ToolCall(id=f"demo_{uuid.uuid4().hex[:16]}", name=name, arguments=arguments)
            yield ToolCallReady(call=call)
            yield StreamDone(finish_reason="tool_calls")
            return
        yield StreamDone(finish_reason="stop")
