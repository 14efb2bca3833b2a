"""A bot restart keeps bindings: the next thread message reaches the same session."""

from __future__ import annotations

import asyncio

from core.providers.scripted import Step
from tests.e2e.conftest import StartBot
from tests.e2e.test_discord_bot import TIMEOUT, persona_messages, settle, spawn


async def test_restart_routes_thread_message_to_the_same_session(start_bot: StartBot) -> None:
    """After a restart over the same store, a thread message continues the bound session."""
    first = await start_bot([Step(text="first answer")])
    await spawn(first, "remember the number 42", mode="session")
    record = first.binding()
    thread_id = int(record.conversation.conversation_id)
    await settle(first, record.target_session_key)
    record = first.binding()  # with what the first turn stored (the status line's id)
    await first.client.close()
    await first.services.close()

    second = await start_bot([Step(text="it was 42")])
    assert second.binding() == record  # rebuilt from the store
    await second.fake.user_says(thread_id, second.world.alice, "what was the number?")
    async with asyncio.timeout(TIMEOUT):
        await second.provider.wait_calls(1)
    await settle(second, record.target_session_key)

    sent = second.provider.calls[0]
    assert [m.content for m in sent if m.role == "user"] == [
        "remember the number 42",
        "what was the number?",
    ]
    assert [m.content for m in sent if m.role == "assistant"] == ["first answer"]
    assert persona_messages(second.fake, thread_id)[-1].content == "it was 42"
    # The webhook's token was never stored: it was found again, not recreated.
    assert len(second.fake.webhooks_in(second.world.channel.id)) == 1
