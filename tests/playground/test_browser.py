"""The playground page in a real browser: spawn, steer, follow up, see the completion.

Headless Chromium from the system's packages, driven by Playwright; no browser is
ever downloaded. Every step saves a screenshot under ``tests/playground/artifacts/``
(git-ignored) so a failure can be looked at, not guessed at. The demo model sleeps a
few seconds per step, which is the window the steer and the follow-up are sent in;
everything else waits with Playwright's auto-waiting expectations, never a sleep.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.playground.conftest import StartPlayground, until

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
TIMEOUT_MS = 60_000


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


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
    await expect(page.get_by_text("Status: ✅ idle")).to_be_visible()
    await shots.take("completed")

    await page.locator('[data-testid="channel"][data-channel-name="general"]').click()
    await expect(page.get_by_test_id("channel-title")).to_have_text("# general")
    await expect(page.get_by_text("alice used /agents spawn")).to_be_visible()
    await expect(
        page.locator('article[data-testid="message"]', has_text="Final answer")
    ).to_have_count(0)
    await shots.take("parent-channel")


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
) -> Shots:
    """A quick playground; Scout spawned on ``task`` in a session thread, opened on the page."""
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    shots = Shots(page, request.node.name)
    await open_page(page, playground.url)
    composer = page.get_by_test_id("composer")
    await composer.fill(f'/agents spawn task:"{task}" mode:session')
    await composer.press("Enter")
    await page.locator('[data-testid="thread"]').click()
    return shots


async def test_brief_and_handoff_buttons_in_the_browser(
    start_playground: StartPlayground, browser_page: Any, request: pytest.FixtureRequest
) -> None:
    """Scout's thread offers the brief button; pressing it, then Accept, hands over to Writer."""
    from playwright.async_api import expect

    page = browser_page
    shots = await scout_thread(start_playground, page, request, "plan a trip")
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
    shots = await scout_thread(start_playground, page, request, "take a note: buy milk")

    allow = page.locator('[data-custom-id^="tb:approval:allow:"]')
    await expect(allow).to_have_text("Allow")
    await expect(page.locator('[data-custom-id^="tb:approval:deny:"]')).to_be_visible()
    await expect(page.get_by_text("wants to run")).to_be_visible()
    scout = page.locator('article[data-testid="message"][data-author="Scout"]')
    await expect(scout.filter(has_text="waiting for approval")).to_be_visible()
    await shots.take("approval-asked")

    await allow.click()
    await expect(page.get_by_text("allowed by alice")).to_be_visible()
    await expect(allow).to_have_count(0)
    await expect(scout.filter(has_text="✅ ok")).to_be_visible()
    await expect(scout.filter(has_text="Final answer")).to_be_visible()
    await expect(page.locator("#error")).to_be_hidden()
    await shots.take("approved-and-answered")
