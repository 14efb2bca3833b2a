"""The playground page in a real browser: spawn, steer, follow up, see the completion.

Headless Chromium from the system's packages, driven by Playwright; no browser is
ever downloaded. Every step saves a screenshot under ``tests/playground/artifacts/``
(git-ignored) so a failure can be looked at, not guessed at. The demo model sleeps a
few seconds per step, which is the window the steer and the follow-up are sent in;
everything else waits with Playwright's auto-waiting expectations, never a sleep.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.playground import Playground
from tests.playground.conftest import StartPlayground, until

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
TIMEOUT_MS = 60_000
MIB = 1024 * 1024


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    return None


@pytest.fixture(autouse=True)
def _browser_present() -> None:
    """Skip, saying why, without a browser; under ``THREADBOUND_REQUIRE_BROWSER=1`` (set by
    ``.ci/run``) fail instead, so CI never passes without having run these."""
    why = _missing()
    if why is None:
        return
    if os.environ.get("THREADBOUND_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{why}; THREADBOUND_REQUIRE_BROWSER=1 makes the browser tests mandatory")
    pytest.skip(why)


@pytest.fixture
async def browser_page(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=TIMEOUT_MS)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            yield page
        finally:
            await browser.close()


class Shots:
    """Numbered screenshots of each step, in a directory per test."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.directory = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        self.directory.mkdir(parents=True, exist_ok=True)
        for old in self.directory.glob("*.png"):
            old.unlink()
        self.count = 0
        print(f"screenshots: {self.directory}")

    async def take(self, step: str) -> None:
        self.count += 1
        await self.page.screenshot(path=str(self.directory / f"{self.count:02d}-{step}.png"))


async def open_page(page: Any, url: str) -> None:
    """Load the playground and wait until its first state is drawn."""
    from playwright.async_api import expect

    await page.goto(url)
    await expect(page.locator("body")).to_have_attribute("data-ready", "true")


async def test_spawn_steer_follow_up_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    from playwright.async_api import expect

    page = browser_page
    playground = await start_playground(sleep_seconds=5.0, steps=2)
    shots = Shots(page, request.node.name)
    await open_page(page, playground.url)
    await expect(page.get_by_test_id("channel-title")).to_have_text("# general")
    await expect(page.locator("#user-select option:checked")).to_have_text("alice")
    await shots.take("loaded")

    composer = page.get_by_test_id("composer")
    await composer.fill("/agents sp")
    await expect(page.get_by_test_id("help-item").first).to_contain_text("/agents spawn task:")
    await shots.take("command-help")
    await composer.fill('/agents spawn task:"map the moon" mode:session')
    await composer.press("Enter")
    await expect(page.locator("#error")).to_be_hidden()

    thread = page.locator('[data-testid="thread"]')
    await expect(thread).to_have_count(1)
    await expect(page.get_by_text("alice used /agents spawn")).to_be_visible()
    await shots.take("thread-created")
    await thread.click()
    await expect(page.get_by_test_id("channel-title")).to_contain_text("map the moon")

    persona = page.locator('article[data-testid="message"][data-author="Scout"]')
    await expect(page.get_by_text("is working in this thread")).to_be_visible()
    await expect(persona.filter(has_text="Working on “map the moon”")).to_be_visible()
    await expect(persona.first.locator(".tag")).to_have_text("AGENT")
    await shots.take("intro-and-streaming")

    await composer.fill("map Mars instead")
    await composer.press("Enter")
    steer = page.locator('article[data-author="alice"]', has_text="map Mars instead")
    await expect(steer.locator('[data-emoji="🧭"]')).to_be_visible()
    await shots.take("steer-marked")

    await composer.fill(">> and Venus")
    await composer.press("Enter")
    follow_up = page.locator('article[data-author="alice"]', has_text=">> and Venus")
    await expect(follow_up.locator('[data-emoji="📥"]')).to_be_visible()
    await shots.take("follow-up-queued")

    await expect(persona.filter(has_text="changing course to “map Mars instead”")).to_be_visible()
    await expect(persona.filter(has_text="as you steered: “map Mars instead”")).to_be_visible()
    await shots.take("changed-course")
    follow_up_answer = persona.filter(has_text="Final answer for “and Venus”")
    await expect(follow_up_answer).to_contain_text("configure [providers] for a real one.)")
    messages = page.get_by_test_id("messages")
    await expect(messages.get_by_text("Status: ✅ idle")).to_be_visible()
    await expect(page.get_by_test_id("pin")).to_have_text("📌Status: ✅ idle")  # pinned on top
    await shots.take("completed")

    await page.locator('[data-testid="channel"][data-channel-name="general"]').click()
    await expect(page.get_by_test_id("channel-title")).to_have_text("# general")
    await expect(page.get_by_text("alice used /agents spawn")).to_be_visible()
    await expect(
        page.locator('article[data-testid="message"]', has_text="Final answer")
    ).to_have_count(0)
    await shots.take("parent-channel")


async def test_the_page_outlives_the_bot_and_what_was_written_meanwhile_is_read_back(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """The bot in its own process: Stop it, then Kill it, from the page. Each time it shows
    offline, people write on, and once started it reads back what was written, once,
    and answers it."""
    from playwright.async_api import expect

    page = browser_page
    playground = await start_playground(sleep_seconds=0.2, steps=1, bot_process=True)
    shots = Shots(page, request.node.name)
    await open_page(page, playground.url)
    bot = page.locator('[data-testid="member"][data-name="threadbound"]')
    await expect(bot).to_have_attribute("data-status", "online")
    await expect(page.get_by_test_id("bot-start")).to_be_disabled()
    await shots.take("bot-online")

    composer = page.get_by_test_id("composer")
    await composer.fill("/agents spawn task:map the moon mode:session")  # unquoted: all the task
    await composer.press("Enter")
    await page.locator('[data-testid="thread"]').click()
    await expect(page.get_by_test_id("channel-title")).to_contain_text("map the moon")
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    await expect(scout.filter(has_text="Final answer for “map the moon”")).to_be_visible()
    await expect(page.get_by_test_id("pin")).to_contain_text("Status: ✅ idle")  # pinned bar
    await expect(page.get_by_test_id("pin-line")).to_contain_text("pinned a message")
    await shots.take("answered-status-pinned")

    caught_up = page.locator("article", has_text="While the bot was offline, 1 message was")
    await page.get_by_test_id("bot-stop").click()
    await expect(bot).to_have_attribute("data-status", "offline")
    await expect(page.get_by_test_id("bot-start")).to_be_enabled()
    await expect(page.get_by_test_id("bot-note")).to_have_text("stopped")
    await shots.take("stopped-offline")
    await composer.fill("/tree")
    await composer.press("Enter")
    error = page.locator("#error")
    await expect(error).to_contain_text("threadbound is offline")
    await shots.take("command-refused-offline")
    await composer.fill("written while it was stopped")  # typing again clears the red bar
    await expect(error).to_be_hidden()
    await composer.press("Enter")
    mine = page.locator('article[data-author="alice"]', has_text="written while it was stopped")
    await expect(mine).to_be_visible()
    await shots.take("written-while-stopped")

    await page.get_by_test_id("bot-start").click()
    await expect(bot).to_have_attribute("data-status", "online")
    await expect(caught_up).to_have_count(1)
    answer = scout.filter(has_text="Final answer for “written while it was stopped”")
    await expect(answer).to_be_visible()
    await expect(page.get_by_test_id("pin")).to_contain_text("Status: ✅ idle")  # turn over
    await shots.take("read-back-after-a-stop")

    await page.get_by_test_id("bot-kill").click()
    await expect(bot).to_have_attribute("data-status", "offline")
    await expect(page.get_by_test_id("bot-note")).to_have_text("killed (signal 9)")
    await composer.fill("and Venus, while it was dead")
    await composer.press("Enter")
    await expect(page.locator('article[data-author="alice"]', has_text="and Venus")).to_be_visible()
    await shots.take("written-while-killed")

    await page.get_by_test_id("bot-start").click()
    await expect(bot).to_have_attribute("data-status", "online")
    await expect(caught_up).to_have_count(2)  # one notice per downtime, never two for one
    await expect(
        scout.filter(has_text="Final answer for “and Venus, while it was dead”")
    ).to_be_visible()
    await expect(answer).to_have_count(1)  # what was read back before is not answered again
    await expect(page.get_by_test_id("pin")).to_contain_text("Status: ✅ idle")
    await expect(page.locator("#error")).to_be_hidden()
    await shots.take("read-back-after-a-kill")


async def test_admin_and_buttons(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Acting as the admin; a bot message's buttons are drawn and a click reaches the bot."""
    from playwright.async_api import expect

    page = browser_page
    playground = await start_playground(sleep_seconds=0.5, steps=1)
    shots = Shots(page, request.node.name)
    await open_page(page, playground.url)
    await page.get_by_test_id("user-select").select_option(label="admin (admin)")
    composer = page.get_by_test_id("composer")
    await composer.fill("/config set key:spawn")  # the bot offers the keys, as in Discord
    key = page.get_by_test_id("choice").filter(has_text="spawnSubagentSessions = on").first
    await expect(key).to_be_visible()
    await shots.take("key-autocompleted")
    await key.click()
    await expect(composer).to_have_value(
        "/config set key:channels.discord.threadBindings.spawnSubagentSessions "
    )
    await composer.press("End")
    await composer.type("value:")
    off = page.locator('[data-testid="choice"][data-value="off"]')
    await expect(off).to_be_visible()
    await shots.take("value-autocompleted")
    await off.click()
    await composer.press("Enter")
    answer = page.locator("article.ephemeral", has_text="admin used /config set")
    await expect(answer).to_contain_text(
        "channels.discord.threadBindings.spawnSubagentSessions set to off (was on) in this server."
    )
    await composer.fill("/config get key:spawnSubagentSessions")
    await composer.press("Enter")
    await expect(page.get_by_text("admin used /config get")).to_be_visible()
    await shots.take("admin-command")

    general = next(c for c in playground.fake.state.guild_channels(playground.world.guild_id))
    bot = playground.world.bot_user_id
    message = playground.fake.ops.post_message(
        general.id,
        bot,
        {
            "content": "Pick one",
            "components": [
                {
                    "type": 1,
                    "components": [{"type": 2, "style": 1, "label": "Go", "custom_id": "x:go"}],
                }
            ],
        },
    )
    button = page.locator(f'article[data-message-id="{message.id}"] [data-custom-id="x:go"]')
    await expect(button).to_have_text("Go")
    await button.click()

    def clicked() -> Any:
        return next(
            (
                i
                for i in playground.fake.state.interactions.values()
                if i.type == 3 and i.data.get("custom_id") == "x:go"
            ),
            None,
        )

    await expect(page.locator("#error")).to_be_hidden()
    interaction = await until(playground, clicked, "the component interaction")
    assert interaction.user_id == playground.world.member_ids[1]
    await shots.take("button-clicked")


async def scout_thread(
    start_playground: StartPlayground, page: Any, request: pytest.FixtureRequest, task: str
) -> tuple[Playground, Shots]:
    """A quick playground; Scout spawned on ``task`` in a session thread, opened on the page."""
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    shots = Shots(page, request.node.name)
    await open_page(page, playground.url)
    composer = page.get_by_test_id("composer")
    await composer.fill(f'/agents spawn task:"{task}" mode:session')
    await composer.press("Enter")
    await page.locator('[data-testid="thread"]').click()
    return playground, shots


async def test_brief_and_handoff_buttons_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Scout's thread offers the brief button; pressing it, then Accept, hands over to Writer."""
    from playwright.async_api import expect

    page = browser_page
    _, shots = await scout_thread(start_playground, page, request, "plan a trip")
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    await expect(scout.filter(has_text="Final answer for “plan a trip”")).to_be_visible()

    brief = page.locator('[data-custom-id^="tb:brief:"]')
    await expect(brief).to_have_text("Ready — produce the brief")
    await shots.take("brief-button")
    await brief.click()
    accept = page.locator('[data-custom-id^="tb:handoff:accept:"]')
    await expect(accept).to_be_visible()
    await expect(page.locator('[data-custom-id^="tb:handoff:reject:"]')).to_be_visible()
    await shots.take("handoff-offered")

    await accept.click()
    writer = page.locator('article[data-testid="message"][data-author="Writer"]')
    await expect(writer.filter(has_text="Final answer")).to_be_visible()
    await expect(page.locator("#error")).to_be_hidden()
    await shots.take("writer-took-over")


async def test_tool_lines_and_approval_buttons_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Scout's demo tools: a die roll shows as a tool line; a note waits for Allow."""
    from playwright.async_api import expect

    page = browser_page
    _, shots = await scout_thread(start_playground, page, request, "take a note: buy milk")

    allow = page.locator('[data-custom-id^="tb:approval:allow:"]')
    await expect(allow).to_have_text("Allow")
    await expect(page.locator('[data-custom-id^="tb:approval:deny:"]')).to_be_visible()
    await expect(page.get_by_text("wants to run")).to_be_visible()
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    waiting = scout.filter(has_text="waiting for approval")
    await expect(waiting).to_be_visible()
    line = page.locator(
        f'article[data-message-id="{await waiting.get_attribute("data-message-id")}"]'
    )
    await shots.take("approval-asked")

    await allow.click()
    await expect(page.get_by_text("allowed by alice")).to_be_visible()
    await expect(allow).to_have_count(0)
    # the same line, edited in place: its outcome and the tool's answer; no second copy
    await expect(line).to_contain_text("demo__write_note · text: take a note: buy milk · ✅ ok")
    await expect(line).to_contain_text("→ note 1 kept: take a note: buy milk")
    await expect(scout.filter(has_text="waiting for approval")).to_have_count(0)
    await expect(scout.filter(has_text="demo__write_note · text:")).to_have_count(1)
    answer = scout.filter(has_text="Final answer")
    await expect(answer).to_contain_text("demo__write_note answered “note 1 kept: take a note")
    await expect(page.locator("#error")).to_be_hidden()
    await shots.take("approved-and-answered")


async def test_a_denied_call_and_a_die_roll_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Deny: the line says so where it was, and the answer says the note was not written.
    A die roll's line shows what it rolled, and so does the answer."""
    from playwright.async_api import expect

    page = browser_page
    _, shots = await scout_thread(start_playground, page, request, "take a note: call mom")
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    waiting = scout.filter(has_text="waiting for approval")
    await expect(waiting).to_be_visible()
    line = page.locator(
        f'article[data-message-id="{await waiting.get_attribute("data-message-id")}"]'
    )
    await shots.take("approval-asked")

    await page.locator('[data-custom-id^="tb:approval:deny:"]').click()
    await expect(page.get_by_text("denied by alice")).to_be_visible()
    await expect(line).to_contain_text("demo__write_note · text: take a note: call mom · ⛔ denied")
    await expect(scout.filter(has_text="waiting for approval")).to_have_count(0)
    answer = scout.filter(has_text="Final answer for “take a note: call mom”")
    await expect(answer).to_contain_text(
        "My call to demo__write_note was not run (“denied by alice: the tool was not run”), "
        "so I left it out."
    )
    await expect(page.locator('[data-custom-id^="tb:brief:"]')).to_be_visible()  # turn over
    await shots.take("denied-and-answered")

    composer = page.get_by_test_id("composer")
    await composer.fill("now roll for luck")
    await composer.press("Enter")
    rolled = scout.filter(
        has_text=re.compile(r"demo__roll_dice · sides: 20 · ✅ ok → rolled a d20: \d+")
    )
    await expect(rolled).to_be_visible()
    roll = re.search(r"rolled a d20: \d+", await rolled.inner_text())
    assert roll is not None
    final = scout.filter(has_text="Final answer for “now roll for luck”")
    await expect(final).to_contain_text(f"demo__roll_dice answered “{roll.group(0)}”.")
    await shots.take("die-rolled-and-answered")


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour, so the page has a picture to draw."""
    row = b"\x00" + bytes(rgb) * width

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


async def test_code_export_and_uploads_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Markdown drawn as Discord does, ``/export`` opened from its link, files sent both ways."""
    from playwright.async_api import expect

    page = browser_page
    _, shots = await scout_thread(start_playground, page, request, "write code for fizzbuzz")
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    answer = scout.filter(has_text="Final answer for “write code for fizzbuzz”")
    await expect(answer.locator('pre.codeblock[data-lang="python"] code')).to_contain_text(
        "def fizzbuzz(n: int) -> str:"
    )
    await expect(answer.locator("h3")).to_have_text("A sample, as asked")
    await expect(answer.locator("li")).to_contain_text("a heading, this list")
    await expect(answer.locator("text=```")).to_have_count(0)  # no fence shown as text
    await shots.take("code-answer")

    composer = page.get_by_test_id("composer")
    await composer.fill("/tree")
    await composer.press("Enter")
    tree = page.locator('article[data-testid="message"]', has_text="alice used /tree")
    await expect(tree.locator("pre.codeblock")).to_contain_text("write code for fizzbuzz")
    await shots.take("tree-as-a-block")

    await composer.fill("/export")
    await composer.press("Enter")
    export = page.locator('[data-testid="attachment-file"][data-filename$=".html"]')
    await expect(export).to_contain_text("KB")
    await shots.take("export-attached")
    async with page.context.expect_page() as opened:
        await export.locator("a").click()
    tab = await opened.value
    await tab.wait_for_load_state()
    await expect(tab.locator("body")).to_contain_text("write code for fizzbuzz")
    await tab.screenshot(path=str(shots.directory / f"{shots.count + 1:02d}-export-opened.png"))
    shots.count += 1
    await tab.close()

    picture = png(48, 32, (230, 120, 20))
    await page.get_by_test_id("file-input").set_input_files(
        [
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"first line\nsecond line\n"},
            {"name": "dot.png", "mimeType": "image/png", "buffer": picture},
        ]
    )
    await expect(page.get_by_test_id("pending-file")).to_have_count(2)
    await shots.take("files-chosen")
    await composer.fill("what is in these?")
    await composer.press("Enter")
    await expect(page.get_by_test_id("pending-file")).to_have_count(0)
    mine = page.locator('article[data-author="alice"]', has_text="what is in these?")
    image = mine.locator('[data-testid="attachment-image"][data-filename="dot.png"] img')
    await expect(image).to_be_visible()
    assert await image.evaluate("img => img.naturalWidth") == 48  # the fake's CDN served it
    await expect(mine.locator('[data-testid="attachment-file"]')).to_contain_text("notes.txt")
    seen = scout.filter(has_text="Files I was given")
    await expect(seen).to_contain_text("notes.txt (2 lines of text)")
    await expect(seen).to_contain_text(f"dot.png (an image, image/png, {len(picture)} bytes)")
    await shots.take("uploads-seen-by-the-bot")

    await page.evaluate(
        """() => {
            const files = new DataTransfer();
            files.items.add(new File(["dropped text"], "dropped.md", { type: "text/markdown" }));
            const main = document.getElementById("main");
            main.dispatchEvent(new DragEvent("dragenter", { dataTransfer: files, bubbles: true }));
            window.droppedFiles = files;
        }"""
    )
    await expect(page.get_by_test_id("drop-overlay")).to_be_visible()
    await shots.take("dragging-a-file")
    await page.evaluate(
        """() => document.getElementById("main").dispatchEvent(new DragEvent("drop",
            { dataTransfer: window.droppedFiles, bubbles: true, cancelable: true }))"""
    )
    await expect(page.get_by_test_id("drop-overlay")).to_be_hidden()
    await expect(page.get_by_test_id("pending-file")).to_have_attribute(
        "data-filename", "dropped.md"
    )
    await composer.press("Enter")  # files alone make a message
    await expect(scout.filter(has_text="dropped.md (1 line of text)")).to_be_visible()
    await shots.take("dropped-file-seen")

    too_many = [{"name": f"n{i}.txt", "mimeType": "text/plain", "buffer": b"x"} for i in range(11)]
    await page.get_by_test_id("file-input").set_input_files(too_many)
    await expect(page.locator("#error")).to_have_text("Discord allows 10 files per message")
    big = {
        "name": "big.bin",
        "mimeType": "application/octet-stream",
        "buffer": b"0" * (MIB * 10 + 1),
    }
    await page.get_by_test_id("file-input").set_input_files([big])
    await expect(page.locator("#error")).to_contain_text("big.bin is 10.00 MB")
    await expect(page.locator("#error")).to_contain_text("Discord allows 10.00 MB per file")
    await expect(page.get_by_test_id("pending-file")).to_have_count(0)
    await shots.take("limits-refused")


async def test_markup_and_mentions_are_inert_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """A message with a script, an image with a handler and ``@everyone`` shows as text."""
    from playwright.async_api import expect

    page = browser_page
    playground, shots = await scout_thread(start_playground, page, request, "say hello")
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    await expect(scout.filter(has_text="Final answer for “say hello”")).to_be_visible()
    hostile = (
        '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> @everyone look'
    )
    composer = page.get_by_test_id("composer")
    await composer.fill(hostile)
    await composer.press("Enter")
    mine = page.locator('article[data-author="alice"]', has_text="@everyone look")
    await expect(mine.get_by_test_id("content")).to_have_text(hostile)
    echoed = scout.filter(has_text="@everyone look")
    await expect(echoed).to_contain_text("<script>window.pwned = 1</script>")
    messages = page.get_by_test_id("messages")
    assert await messages.locator("script, .content img").count() == 0
    assert await page.evaluate("() => window.pwned") is None
    await shots.take("inert-markup")

    answers = [
        m
        for m in playground.fake.state.messages.values()
        if m.webhook_id is not None and "@everyone look" in m.content
    ]
    assert answers
    assert not any(m.mention_everyone for m in answers)


async def test_component_states_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Select menus reach the bot; decided components disable; ephemeral, archived, deleted."""
    from playwright.async_api import expect

    page = browser_page
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    shots = Shots(page, request.node.name)
    await open_page(page, playground.url)
    fake, world = playground.fake, playground.world
    general = next(iter(fake.state.guild_channels(world.guild_id)))
    menu = {
        "type": 3,
        "custom_id": "x:colour",
        "placeholder": "Pick a colour",
        "options": [
            {"label": "Red", "value": "red", "description": "warm"},
            {"label": "Blue", "value": "blue"},
        ],
    }
    several = {"type": 3, "custom_id": "x:many", "min_values": 1, "max_values": 2}
    several["options"] = [{"label": n, "value": n} for n in ("a", "b", "c")]
    people = {"type": 5, "custom_id": "x:who", "placeholder": "Someone"}
    rows = [{"type": 1, "components": [c]} for c in (menu, several, people)]
    message = fake.ops.post_message(
        general.id, world.bot_user_id, {"content": "Choose", "components": rows}
    )
    article = page.locator(f'article[data-message-id="{message.id}"]')
    await expect(article.locator('[data-custom-id="x:colour"] option')).to_have_count(3)
    await shots.take("select-menus")

    def picked(custom_id: str) -> Any:
        return next(
            (
                i
                for i in fake.state.interactions.values()
                if i.type == 3 and i.data.get("custom_id") == custom_id
            ),
            None,
        )

    await article.locator('[data-custom-id="x:colour"]').select_option("blue")
    assert (await until(playground, lambda: picked("x:colour"), "the pick")).data["values"] == [
        "blue"
    ]
    many = article.locator('[data-custom-id="x:many"]')
    await many.select_option(["a", "c"])
    fake.ops.post_message(general.id, world.bot_user_id, {"content": "meanwhile"})
    await expect(page.get_by_text("meanwhile")).to_be_visible()  # the channel was redrawn
    assert await many.evaluate("s => [...s.selectedOptions].map(o => o.value)") == ["a", "c"]
    await article.get_by_test_id("select-apply").click()
    assert (await until(playground, lambda: picked("x:many"), "the picks")).data["values"] == [
        "a",
        "c",
    ]
    bob = world.member_ids[1]
    await article.locator('[data-custom-id="x:who"]').select_option(str(bob))
    who = await until(playground, lambda: picked("x:who"), "the user pick")
    assert who.data["values"] == [str(bob)]
    assert str(bob) in who.data["resolved"]["users"]

    decided = [{"type": 1, "components": [c | {"disabled": True}]} for c in (menu, several, people)]
    fake.ops.edit_message(message, {"content": "Chosen: blue", "components": decided})
    await expect(article.locator('[data-custom-id="x:colour"]')).to_be_disabled()
    await expect(article.get_by_test_id("select-apply")).to_be_disabled()
    await shots.take("decided-and-disabled")

    composer = page.get_by_test_id("composer")
    await composer.fill("/config get key:spawnSubagentSessions")
    await composer.press("Enter")
    answer = page.locator("article.ephemeral", has_text="alice used /config get")
    await expect(answer).to_contain_text("Only you can see this")
    await shots.take("ephemeral-marked")

    await composer.fill('/agents spawn task:"tidy up" mode:session')
    await composer.press("Enter")
    thread_button = page.locator('[data-testid="thread"]')
    await expect(thread_button).to_have_count(1)
    thread_id = int(await thread_button.get_attribute("data-channel-id") or 0)

    def said_all() -> bool | None:
        """The agent's turn over, announced, and the brief offered: nothing more comes
        (anything the bot says in an archived thread reopens it)."""
        said = " ".join(m.content for m in fake.messages_in(thread_id))
        return (
            True
            if "✅ idle" in said and "completed its task" in said and "settled" in said
            else None
        )

    await until(playground, said_all, "the agent's last words")
    await fake.archive_thread(thread_id)
    await expect(thread_button).to_have_attribute("data-archived", "true")
    await expect(thread_button).to_contain_text("archived")
    await thread_button.click()
    await expect(composer).to_have_attribute("placeholder", re.compile("This thread is archived"))
    await shots.take("archived-thread")

    await page.locator('[data-testid="channel"][data-channel-name="general"]').click()
    await expect(article).to_be_visible()
    fake.ops.delete_message(fake.message(message.id))
    await expect(article).to_have_count(0)
    await shots.take("deleted-message-gone")


LOADED = """ids => Promise.all(ids.map(id => {
    const img = document.querySelector(`article[data-message-id="${id}"] img`);
    return img.complete ? null : new Promise(done => img.addEventListener("load", done));
}))"""
"""Resolves once each message's picture has loaded (and the page's own handler has run:
it listens on the way down to the image, before the image's own listeners)."""
NEXT_FRAME = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
FROM_BOTTOM = "box => box.scrollHeight - box.scrollTop - box.clientHeight"


async def test_a_thread_stays_at_its_bottom_while_its_images_load(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Pictures that load after the thread was drawn keep the view at the newest message,
    unless the reader scrolled up; a reply sent next lands in view."""
    from playwright.async_api import expect

    page = browser_page
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    shots = Shots(page, request.node.name)
    fake, world = playground.fake, playground.world
    general = next(c for c in fake.state.guild_channels(world.guild_id) if c.name == "general")
    thread = fake.add_thread(general, "holiday pictures", owner=world.member_ids[0])
    colours = [(200, 60, 60), (60, 160, 60), (60, 90, 200), (200, 160, 40)]
    posted = [
        await fake.user_says(
            thread,
            world.member_ids[0],
            f"picture {n}",
            files=[(f"p{n}.png", png(300, 300, c), "image/png")],
        )
        for n, c in enumerate(colours)
    ]
    held: list[Any] = []
    all_asked, release = asyncio.Event(), asyncio.Event()

    async def hold(route: Any) -> None:  # the pictures arrive when the test says
        held.append(route)
        if len(held) == len(posted):
            all_asked.set()
        await release.wait()
        await route.continue_()

    await page.route("**/attachments/**", hold)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    await open_page(page, playground.url)
    await page.locator(f'[data-channel-id="{thread.id}"]').click()
    await expect(page.get_by_test_id("attachment-image")).to_have_count(len(posted))
    async with asyncio.timeout(60):
        await all_asked.wait()
    box = page.get_by_test_id("messages")
    await shots.take("drawn-before-the-pictures")

    loading = asyncio.ensure_future(page.evaluate(LOADED, [str(m.id) for m in posted]))
    release.set()
    await loading
    await page.evaluate(NEXT_FRAME)
    assert await box.evaluate(FROM_BOTTOM) <= 1  # not short of the bottom by the pictures
    await shots.take("pictures-loaded-at-the-bottom")

    await box.hover()
    await page.mouse.wheel(0, -5000)
    await page.wait_for_function("() => document.getElementById('messages').scrollTop === 0")
    await page.evaluate(NEXT_FRAME)
    late = await fake.user_says(
        thread,
        world.member_ids[0],
        "one more",
        files=[("late.png", png(300, 200, (9, 9, 9)), "image/png")],
    )
    await expect(page.locator(f'article[data-message-id="{late.id}"] img')).to_have_count(1)
    await page.evaluate(LOADED, [str(late.id)])
    await page.evaluate(NEXT_FRAME)
    assert await box.evaluate("box => box.scrollTop") == 0  # the reader stays where they were
    await shots.take("scrolled-up-stays-put")

    await page.mouse.wheel(0, 20000)
    await page.wait_for_function(f"() => ({FROM_BOTTOM})(document.getElementById('messages')) <= 1")
    await page.evaluate(NEXT_FRAME)
    composer = page.get_by_test_id("composer")
    await composer.fill("/tree")
    await composer.press("Enter")
    reply = page.locator('article[data-testid="message"]', has_text="alice used /tree")
    await expect(reply).to_be_visible()
    await expect(reply).to_be_in_viewport()
    assert await box.evaluate(FROM_BOTTOM) <= 1
    await shots.take("reply-in-view")
    assert failed == []
