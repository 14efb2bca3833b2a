"""The playground in-process, through the page's JSON API: spawn, steer, follow up, finish."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from bot.playground import Playground, PlaygroundError
from bot.playground.web import typed_mentions
from core.providers.demo import LABEL
from fakediscord import Message
from fakediscord.permissions import BOT_DEFAULT
from tests.playground.conftest import Page, StartPlayground, make_config, until

FINAL = f"{LABEL} Final answer"
MIB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def by_name(snapshot: dict, name: str) -> dict:
    return next(c for c in snapshot["channels"] if c["name"] == name)


def bound_thread(playground: Playground) -> int | None:
    record = next(iter(playground.services.bindings.live()), None)
    return int(record.conversation.conversation_id) if record is not None else None


def persona(
    playground: Playground, channel_id: int, needle: str, *, complete: bool = False
) -> Message | None:
    """The first persona message containing ``needle`` (fully streamed, if ``complete``)."""
    return next(
        (
            m
            for m in playground.fake.messages_in(channel_id)
            if m.webhook_id is not None
            and needle in m.content
            and (not complete or m.content.endswith("for a real one.)"))
        ),
        None,
    )


def status_idle(playground: Playground, thread: int) -> bool | None:
    return any(m.content == "Status: ✅ idle" for m in playground.fake.messages_in(thread)) or None


async def opened(
    http: aiohttp.ClientSession, playground: Playground, channel: str
) -> tuple[Page, str, str]:
    """The page's API, the id of ``channel`` and alice's id, as the page first reads them."""
    page = Page(http, playground.url)
    snapshot = await page.get("/api/state")
    return page, by_name(snapshot, channel)["id"], snapshot["users"][0]["id"]


def marked(playground: Playground, message_id: int, emoji: str) -> bool | None:
    message = playground.fake.state.messages[message_id]
    return any(r.emoji_name == emoji for r in message.reactions) or None


async def test_session_spawn_steer_follow_up_and_completion(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    playground = await start_playground(sleep_seconds=1.5, steps=2)
    page = Page(http, playground.url)
    snapshot = await page.get("/api/state")
    assert [c["name"] for c in snapshot["channels"]] == ["general", "research"]
    assert {u["name"]: u["admin"] for u in snapshot["users"]} == {"alice": False, "admin": True}
    assert any(e["usage"].startswith("/agents spawn task:<text>") for e in snapshot["commands"])
    general = by_name(snapshot, "general")["id"]
    alice = next(u["id"] for u in snapshot["users"] if u["name"] == "alice")

    spawned = await page.post(
        "/api/command",
        {
            "channel_id": general,
            "user_id": alice,
            "text": '/agents spawn task:"map the moon" mode:session',
        },
    )
    assert spawned["options"] == {"task": "map the moon", "mode": "session"}
    thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
    await until(playground, lambda: persona(playground, thread, "Step 1/2"), "the first step")

    steer = await page.post(
        "/api/messages",
        {"channel_id": str(thread), "user_id": alice, "content": "map Mars instead"},
    )
    await until(playground, lambda: marked(playground, int(steer["id"]), "🧭"), "the steer mark")
    follow = await page.post(
        "/api/messages", {"channel_id": str(thread), "user_id": alice, "content": ">> and Venus"}
    )
    await until(
        playground, lambda: marked(playground, int(follow["id"]), "📥"), "the follow-up mark"
    )

    await until(
        playground,
        lambda: persona(playground, thread, "changing course to “map Mars instead”"),
        "the new course",
    )
    final = await until(
        playground,
        lambda: persona(playground, thread, "as you steered", complete=True),
        "the final answer",
    )
    assert "“map Mars instead”" in final.content
    await until(
        playground,
        lambda: persona(playground, thread, "Final answer for “and Venus”"),
        "the follow-up's answer",
    )
    await until(playground, lambda: status_idle(playground, thread), "the idle status line")

    rendered = await page.get(f"/api/channels/{thread}/messages?viewer={alice}")
    texts = [m["content"] for m in rendered["messages"]]
    assert any(FINAL in t for t in texts)
    steer_view = next(m for m in rendered["messages"] if m["id"] == steer["id"])
    assert steer_view["reactions"] == [{"emoji": "🧭", "count": 1, "me": False}]
    personas = {m["author"]["name"] for m in rendered["messages"] if m["author"]["webhook"]}
    assert personas == {"Scout"}  # the demo agent a file without [agents] gets
    parent = await page.get(f"/api/channels/{general}/messages?viewer={alice}")
    assert not any(FINAL in m["content"] for m in parent["messages"])
    assert playground.counts().bindings == 1


async def test_bad_commands_are_explained(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    playground = await start_playground()
    page, general, alice = await opened(http, playground, "general")
    body = {"channel_id": general, "user_id": alice}
    error = await page.post("/api/command", body | {"text": "/agents spawn"}, status=400)
    assert "needs task" in error["error"]
    error = await page.post("/api/command", body | {"text": "/nope"}, status=400)
    assert "known: /agents" in error["error"]
    error = await page.post("/api/messages", body | {"user_id": "1", "content": "x"}, status=400)
    assert "not one of the playground's users" in error["error"]


async def test_the_config_example_in_help_works_as_typed(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """/help shows a /config example; typed as it reads, it switches the flag."""
    playground = await start_playground()
    page, general, _ = await opened(http, playground, "general")
    snapshot = await page.get("/api/state")
    (entry,) = [e for e in snapshot["commands"] if e["usage"].startswith("/config set ")]
    example = "/config set key:spawnSubagentSessions value:on"
    assert entry["description"].endswith("e.g. key:spawnSubagentSessions value:on")
    admin = next(u["id"] for u in snapshot["users"] if u["name"] == "admin")
    body = {"channel_id": general, "user_id": admin, "text": example.removesuffix(":on") + ":off"}
    await page.post("/api/command", body)

    def answer() -> str | None:
        shown = playground.fake.state.messages_in(int(general), include_ephemeral=True)
        replies = [m.content for m in shown if "set to" in m.content]
        return replies[0] if replies else None

    reply = await until(playground, answer, "the /config answer")
    assert reply == (
        "`channels.discord.threadBindings.spawnSubagentSessions` set to `off` (was `on`) "
        "in this server."
    )
    assert not playground.services.overrides.spawns_threads(str(playground.world.guild_id))


def ephemeral_reply(playground: Playground, channel: int, needle: str) -> str | None:
    shown = playground.fake.state.messages_in(channel, include_ephemeral=True)
    return next((m.content for m in shown if needle in m.content), None)


async def test_model_names_the_demo_model(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """Without a provider, /model says the demo model answers, as every answer is labelled."""
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    page, general, alice = await opened(http, playground, "general")
    body = {"channel_id": general, "user_id": alice}
    await page.post("/api/command", body | {"text": '/agents spawn task:"hi" mode:session'})
    thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
    await page.post("/api/command", body | {"channel_id": str(thread), "text": "/model"})

    reply = await until(
        playground, lambda: ephemeral_reply(playground, thread, "model"), "the /model answer"
    )

    assert reply.startswith(
        f"This session's model: the built-in demo model (its answers start with `{LABEL}`)."
    )
    assert "the provider's default" not in reply
    assert "[providers.<name>]" in reply


async def test_the_bot_autocompletes_an_option_as_it_is_typed(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """/config set key:spa… asks the bot, as Discord's client does; the admin gets choices."""
    playground = await start_playground()
    page, general, alice = await opened(http, playground, "general")
    snapshot = await page.get("/api/state")
    admin = next(u["id"] for u in snapshot["users"] if u["name"] == "admin")
    body = {"channel_id": general, "user_id": admin}

    keys = await page.post("/api/autocomplete", body | {"text": "/config set key:spawn"})
    values = await page.post(
        "/api/autocomplete", body | {"text": "/config set key:spawnSubagentSessions value:"}
    )
    nothing = await page.post("/api/autocomplete", body | {"text": "/agents spawn task:x"})
    refused = await page.post(
        "/api/autocomplete", body | {"user_id": alice, "text": "/config get key:"}
    )

    assert keys["option"] == "key"
    assert keys["choices"][0] == {
        "name": "channels.discord.threadBindings.spawnSubagentSessions = on",
        "value": "channels.discord.threadBindings.spawnSubagentSessions",
    }
    assert values == {
        "option": "value",
        "choices": [{"name": "on", "value": "on"}, {"name": "off", "value": "off"}],
    }
    assert nothing == {"choices": []}
    assert refused["choices"] == []  # alice is not an administrator


async def test_the_page_has_an_icon(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """The page links its icon and /favicon.ico answers too: no 404 on a page load."""
    playground = await start_playground()
    async with http.get(playground.url) as page:
        assert '<link rel="icon" href="/static/favicon.svg"' in await page.text()
    for path in ("favicon.ico", "static/favicon.svg"):
        async with http.get(playground.url + path) as icon:
            assert icon.status == 200, path
            assert icon.content_type == "image/svg+xml"
            assert (await icon.text()).startswith("<svg")


async def test_events_name_the_changed_channel(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    playground = await start_playground()
    page, research, alice = await opened(http, playground, "research")
    async with http.get(page.url + "/api/events") as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        lines = stream.content
        assert (await lines.readline()).startswith(b"retry:")
        await page.post(
            "/api/messages", {"channel_id": research, "user_id": alice, "content": "hi"}
        )
        while True:
            line = (await lines.readline()).decode()
            if line.startswith("data: ") and line[6:].strip() != "{}":
                break
        change = json.loads(line[6:])
        assert change["channels"] == [research]
        assert change["tree"] is False


async def test_a_change_made_while_an_event_is_written_is_not_left_unsaid(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """The bug: the stream waited for the change *after* it had written an event, so the
    last change of a burst that landed meanwhile (a thread archived just after the agent's
    last words) never reached the page."""
    playground = await start_playground()
    page, research, alice = await opened(http, playground, "research")
    assert playground.web is not None
    view = playground.web.view
    taken = view.fingerprints
    channel = playground.fake.state.channel(int(research))
    late: list[bool] = []

    def fingerprints() -> Any:
        found = taken()
        if len(late) == 1:  # the first event's fingerprints are taken: now the late change
            late.append(True)
            playground.fake.ops.update_channel(channel, {"name": "research-late"})
        return found

    async with http.get(page.url + "/api/events") as stream:
        lines = stream.content
        assert (await lines.readline()).startswith(b"retry:")
        view.fingerprints = fingerprints  # type: ignore[method-assign]
        late.append(False)
        await page.post(
            "/api/messages", {"channel_id": research, "user_id": alice, "content": "hi"}
        )
        events = []
        async with asyncio.timeout(10):
            while len(events) < 2:
                line = (await lines.readline()).decode()
                if line.startswith("data: ") and line[6:].strip() != "{}":
                    events.append(json.loads(line[6:]))
        assert late == [False, True]
        assert events[0]["channels"] == [research]
        assert events[1]["tree"] is True  # renamed after the first was taken


async def test_a_restart_finds_the_saved_world(start_playground: StartPlayground) -> None:
    first = await start_playground()
    guild_id = first.world.guild_id
    channel = next(c for c in first.fake.state.guild_channels(guild_id) if c.name == "research")
    alice = first.world.member_ids[0]
    await first.fake.user_says(channel, alice, "remember me")
    await first.stop()
    second = await start_playground()
    assert second.world.guild_id == guild_id
    assert [m.content for m in second.fake.messages_in(channel.id)] == ["remember me"]


async def test_who_used_a_command_is_still_shown_after_a_restart(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """The line above a command's answer ("alice used /tree") survives the playground."""
    first = await start_playground()
    page, general, alice = await opened(http, first, "general")
    await page.post("/api/command", {"channel_id": general, "user_id": alice, "text": "/tree"})

    def answered() -> Message | None:
        shown = first.fake.state.messages_in(int(general), include_ephemeral=True)
        return next((m for m in shown if m.interaction_id is not None), None)

    answer = await until(first, answered, "the /tree answer")
    await first.stop()
    second = await start_playground()
    shown = await Page(http, second.url).get(f"/api/channels/{general}/messages?viewer={alice}")
    (rendered,) = [m for m in shown["messages"] if m["id"] == str(answer.id)]
    assert rendered["interaction"] == {"user": "alice", "command": "tree"}


def status_line(playground: Playground, thread: int) -> Message | None:
    return next(
        (m for m in playground.fake.messages_in(thread) if m.content.startswith("Status:")), None
    )


async def test_the_status_line_is_pinned_and_the_page_shows_it(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    page, general, alice = await opened(http, playground, "general")
    body = {
        "channel_id": general,
        "user_id": alice,
        "text": "/agents spawn task:pin it mode:session",
    }
    await page.post("/api/command", body)
    thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
    status = await until(
        playground,
        lambda: line if (line := status_line(playground, thread)) and line.pinned else None,
        "the pinned status line",
    )
    shown = await page.get(f"/api/channels/{thread}/messages?viewer={alice}")
    (pinned,) = [m for m in shown["messages"] if m["pinned"]]
    assert pinned["id"] == str(status.id)
    (line,) = [m for m in shown["messages"] if m["type"] == 6]  # "… pinned a message"
    assert line["author"]["name"] == "threadbound"
    assert line["reference_message_id"] == str(status.id)


async def test_without_pin_messages_the_status_line_works_unpinned(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    world = playground.world
    playground.fake.set_bot_permissions(world.guild_id, world.bot_user_id, BOT_DEFAULT)
    await playground.fake.sync(world.bot_user_id)
    page, general, alice = await opened(http, playground, "general")
    body = {
        "channel_id": general,
        "user_id": alice,
        "text": "/agents spawn task:no pins mode:session",
    }
    with capture_logs() as logs:
        await page.post("/api/command", body)
        thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
        await until(playground, lambda: status_idle(playground, thread), "the idle status line")
    status = status_line(playground, thread)
    assert status is not None
    assert not status.pinned
    assert not [m for m in playground.fake.messages_in(thread) if m.type == 6]
    (skipped,) = [e for e in logs if e["event"] == "delivery.pin_skipped"]
    assert skipped["message_id"] == str(status.id)
    assert "Pin Messages" in skipped["reason"]


async def test_requests_from_other_sites_are_refused(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """No login on the page, so a web site must not drive it through a visitor's browser."""
    playground = await start_playground()
    page = Page(http, playground.url)
    snapshot = await page.get("/api/state")
    body = {
        "channel_id": by_name(snapshot, "general")["id"],
        "user_id": snapshot["users"][0]["id"],
        "content": "x",
    }
    url = page.url + "/api/messages"
    async with http.post(url, data=json.dumps(body), headers={"Content-Type": "text/plain"}) as r:
        assert r.status == 403
    async with http.post(url, json=body, headers={"Origin": "http://evil.example"}) as r:
        assert r.status == 403
    async with http.get(page.url + "/api/state", headers={"Host": "evil.example"}) as r:
        assert r.status == 403
    async with http.post(url, json=body, headers={"Origin": page.url}) as r:
        assert r.status == 200


async def test_a_taken_port_is_named(tmp_path: Path, start_playground: StartPlayground) -> None:
    first = await start_playground()
    port = int(first.url.rsplit(":", 1)[1].strip("/"))
    config = make_config(tmp_path / "second", sleep_seconds=1.0)
    second = Playground(config, port=port)
    with pytest.raises(PlaygroundError, match=f"cannot listen on 127.0.0.1:{port}"):
        await second.start()
    assert second.services is None  # the bot was never started
    with pytest.raises(aiohttp.ClientConnectionError):  # and the fake Discord stopped again
        async with aiohttp.ClientSession() as session, session.get(second.fake.base_url):
            pass


def upload_form(fields: dict[str, str], files: list[tuple[str, bytes, str]]) -> aiohttp.FormData:
    form = aiohttp.FormData(default_to_multipart=True)
    for key, value in fields.items():
        form.add_field(key, value)
    for name, data, content_type in files:
        form.add_field("files", data, filename=name, content_type=content_type)
    return form


UPLOAD = {"X-Playground-Upload": "1"}


async def upload(
    http: aiohttp.ClientSession,
    page: Page,
    fields: dict[str, str],
    files: list[tuple[str, bytes, str]],
    *,
    headers: dict[str, str] = UPLOAD,
) -> tuple[int, dict]:
    form = upload_form(fields, files)
    async with http.post(page.url + "/api/messages", data=form, headers=headers) as response:
        return response.status, await response.json()


async def test_uploads_reach_the_bot_and_show_under_the_message(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """A multipart post is an ordinary message with attachments; the page lists them."""
    playground = await start_playground(sleep_seconds=0.2, steps=1)
    page = Page(http, playground.url)
    snapshot = await page.get("/api/state")
    assert snapshot["limits"] == {"content": 2000, "files": 10, "file_bytes": 10 * 1024 * 1024}
    general = by_name(snapshot, "general")["id"]
    alice = snapshot["users"][0]["id"]
    await page.post(
        "/api/command",
        {"channel_id": general, "user_id": alice, "text": '/agents spawn task:"read" mode:session'},
    )
    thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
    await until(playground, lambda: status_idle(playground, thread), "the first answer")

    status, sent = await upload(
        http,
        page,
        {"channel_id": str(thread), "user_id": alice, "content": ""},
        [("notes.txt", b"one\ntwo\nthree\n", "text/plain"), ("dot.png", PNG, "image/png")],
    )
    assert status == 200, sent
    answer = await until(
        playground,
        lambda: persona(playground, thread, "Files I was given", complete=True),
        "the answer naming the files",
    )
    assert "`notes.txt` (3 lines of text)" in answer.content
    assert f"`dot.png` (an image, image/png, {len(PNG)} bytes)" in answer.content

    listed = await page.get(f"/api/channels/{thread}/messages?viewer={alice}")
    (mine,) = [m for m in listed["messages"] if m["id"] == sent["id"]]
    notes, dot = mine["attachments"]
    assert (notes["filename"], notes["size"], notes["image"]) == ("notes.txt", 14, False)
    assert (dot["filename"], dot["image"]) == ("dot.png", True)
    async with http.get(dot["url"]) as served:  # the fake Discord's own file route
        assert (served.status, await served.read()) == (200, PNG)
        assert served.content_type == "image/png"


async def test_uploads_outside_discords_limits_are_refused_by_name(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    playground = await start_playground()
    page, research, alice = await opened(http, playground, "research")
    fields = {"channel_id": research, "user_id": alice, "content": "x"}

    status, error = await upload(http, page, fields, [("big.bin", b"0" * (10 * MIB + 1), "a/b")])
    assert (status, error["error"]) == (400, "big.bin is larger than Discord's 10 MB per file")
    eleven = [(f"{i}.txt", b"x", "text/plain") for i in range(11)]
    status, error = await upload(http, page, fields, eleven)
    assert (status, error["error"]) == (400, "Discord allows 10 files per message at most")
    status, error = await upload(http, page, fields | {"content": "x" * 2001}, [])
    assert status == 400
    assert "2000 characters at most" in error["error"]
    status, error = await upload(http, page, fields | {"content": "x" * 70_000}, [])
    assert (status, error["error"]) == (400, "the content field is too long")
    async with http.post(page.url + "/api/messages", json=fields | {"content": "x" * MIB}) as r:
        assert r.status == 413  # a JSON body keeps aiohttp's 1 MiB limit; only uploads stream
    status, error = await upload(http, page, fields, [("a.txt", b"x", "text/plain")], headers={})
    assert status == 403  # a cross-site form cannot add the header
    assert playground.fake.messages_in(int(research)) == []  # nothing half-sent


async def test_uploads_survive_a_restart_and_deleted_messages_go(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    first = await start_playground()
    page, research, alice = await opened(http, first, "research")
    fields = {"channel_id": research, "user_id": alice, "content": "keep this"}
    status, _ = await upload(http, page, fields, [("dot.png", PNG, "image/png")])
    assert status == 200
    status, gone = await upload(http, page, fields | {"content": "drop this"}, [])
    assert status == 200
    first.fake.ops.delete_message(first.fake.message(int(gone["id"])))
    await first.stop()

    second = await start_playground()
    page = Page(http, second.url)
    listed = await page.get(f"/api/channels/{research}/messages?viewer={alice}")
    assert [m["content"] for m in listed["messages"]] == ["keep this"]
    (dot,) = listed["messages"][0]["attachments"]
    assert dot["url"].startswith(second.fake.base_url)  # the new fake's address
    async with http.get(dot["url"]) as served:
        assert (served.status, await served.read()) == (200, PNG)


async def test_a_newcomers_hello_to_the_bot_starts_a_session(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """``@threadbound hello`` typed in a channel is a real mention (as Discord's client
    sends it), and the bot starts a session in a new thread; ``@nobody`` stays text."""
    playground = await start_playground(sleep_seconds=0.1, steps=1)
    page = Page(http, playground.url)
    snapshot = await page.get("/api/state")
    general = by_name(snapshot, "general")["id"]
    alice = next(u["id"] for u in snapshot["users"] if u["name"] == "alice")

    sent = await page.post(
        "/api/messages",
        {"channel_id": general, "user_id": alice, "content": "@threadbound hello, @nobody"},
    )
    said = playground.fake.message(int(sent["id"]))
    assert playground.world is not None
    assert said.content == f"<@{playground.world.bot_user_id}> hello, @nobody"
    thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
    record = next(iter(playground.services.bindings.live()))
    assert record.meta.agent == "scout"
    assert int(record.conversation.conversation_id) == thread


@pytest.mark.parametrize(
    ("typed", "sent"),
    [
        ("hey @threadbound.", "hey <@1>."),
        ("@threadbound, hello", "<@1>, hello"),
        ("@a.b!", "<@2>!"),
        ("write to x@threadbound", "write to x@threadbound"),
        ("@nobody here", "@nobody here"),
    ],
)
def test_a_typed_name_is_a_mention_and_a_full_stop_ends_it(typed: str, sent: str) -> None:
    """As Discord's client sends it; a dot may sit inside a name, never end one."""
    assert typed_mentions(typed, {"threadbound": 1, "a.b": 2}) == sent


async def test_a_scheduled_job_fires_in_the_playground(
    start_playground: StartPlayground, http: aiohttp.ClientSession
) -> None:
    """The README's try: ``/schedule add when:"in 30s"`` in #general (here 2 s) is confirmed
    with its id, then a subagent starts on it in a new thread, announced in the channel."""
    playground = await start_playground(sleep_seconds=0.1, steps=1)
    page = Page(http, playground.url)
    snapshot = await page.get("/api/state")
    general = by_name(snapshot, "general")["id"]
    alice = next(u["id"] for u in snapshot["users"] if u["name"] == "alice")
    await page.post(
        "/api/command",
        {
            "channel_id": general,
            "user_id": alice,
            "text": '/schedule add when:"in 2s" task:"list three sorting algorithms" name:sorting',
        },
    )

    def said(prefix: str) -> Message | None:
        return next(
            (m for m in playground.fake.messages_in(int(general)) if m.content.startswith(prefix)),
            None,
        )

    confirmed = await until(playground, lambda: said("⏰ Scheduled “sorting”."), "the answer")
    assert "Runs once in 2 seconds" in confirmed.content
    fired = await until(playground, lambda: said("⏰ Scheduled: sorting"), "the run")
    thread = await until(playground, lambda: bound_thread(playground), "the run's thread")
    assert f"<#{thread}>" in fired.content
