"""Starting a conversation by @mentioning the bot in a channel.

A newcomer's first "@threadbound hello" must not go unanswered. A person's
message in a server's text channel (not a thread) that mentions the bot starts
a session with the default agent in a new thread, exactly as
``/agents spawn task:<the message> mode:session`` would: the same flag
(``spawnSubagentSessions``, resolved for this guild and account), the same
right (Discord's "Use Application Commands" in that channel, which gates the
slash command), the same checks and the same spawn use case (:mod:`bot.spawn`),
with the author as the owner and the message, the mention taken out, as the
task. Every outcome is a reply to the message: where the session started, or
why it did not and what to do instead.

Without a mention a channel's messages stay the people's own: nothing happens.
A mention in a bound thread is a message to its session (the inbox's, before
this module is asked); in a thread that is not bound, the reply says where a
conversation starts.
"""

from __future__ import annotations

import re
from typing import Final

import discord

from adapters.discord.account import AccountRuntime
from bot.spawn import SpawnCommand, plan
from core.errors import ThreadboundError
from core.logging import get_logger

__all__ = [
    "EMPTY_MENTION",
    "IN_A_THREAD",
    "NO_RIGHT",
    "START_HINT",
    "is_mentioned",
    "on_mention",
    "task_of",
]

_log = get_logger("bot.mentions")
_NO_MENTIONS: Final = discord.AllowedMentions.none()

START_HINT: Final = (
    "mention me in a channel with what you would like done (a session starts in a new "
    "thread), or use `/agents spawn`"
)
"""How a conversation starts, as ``/help`` and the replies below say it."""
EMPTY_MENTION: Final = (
    "👋 To start a conversation, mention me together with what you would like, e.g. "
    "`@{name} summarise the notes pinned here`: I start a session in a new thread. "
    "`/agents spawn` does the same."
)
IN_A_THREAD: Final = (
    "👋 This thread is not bound to a session, so nobody here reads it. To start a "
    "conversation, " + START_HINT + "; `/focus` binds a thread to a session you own."
)
NO_RIGHT: Final = (
    "⛔ No session was started: you may not use this bot's commands in this channel "
    "(Discord's Use Application Commands permission), and a mention starts a session "
    "as `/agents spawn` would. Ask a server administrator if you should."
)
NOT_STARTED: Final = "⚠️ No session was started: {reason}"
UNEXPECTED: Final = (
    "⚠️ No session was started because of an unexpected error (it was logged); try "
    "again, and tell an admin if it keeps happening."
)
FILES_LEFT: Final = (
    "\nThe files attached to your message were not given to the agent: send them again "
    "in the thread."
)


def is_mentioned(client: discord.Client, message: discord.Message) -> bool:
    """Whether the text of ``message`` names the bot itself: its user, or the role
    Discord gave it.

    ``@everyone`` and ``@here`` do not count: they are for the people. Nor does a
    reply to one of the bot's messages, which Discord counts as a mention: a "thanks"
    under "Started … in #thread" is not a request for another session.
    """
    me = client.user
    if me is None:
        return False
    if me.id in message.raw_mentions:
        return True
    guild = message.guild
    own_role = guild.self_role if guild is not None else None
    return own_role is not None and own_role.id in message.raw_role_mentions


def task_of(client: discord.Client, message: discord.Message) -> str:
    """The message's text without the bot's mentions (user or role), spaces tidied."""
    me = client.user
    guild = message.guild
    own_role = guild.self_role if guild is not None else None
    patterns = [rf"<@!?{me.id}>"] if me is not None else []
    if own_role is not None:
        patterns.append(rf"<@&{own_role.id}>")
    text = re.sub("|".join(patterns), " ", message.content) if patterns else message.content
    return "\n".join(" ".join(line.split()) for line in text.strip().splitlines()).strip()


async def on_mention(
    account: AccountRuntime, client: discord.Client, message: discord.Message
) -> None:
    """A person's message outside any bound conversation: start a session if it
    mentions the bot, else leave it alone. Never raises: every failure is a reply."""
    if not is_mentioned(client, message) or not account.inbox.is_person(message):
        return
    channel = message.channel
    if message.guild is None:
        return  # a direct message: not a server channel, and no thread can open there
    if isinstance(channel, discord.Thread):
        await _reply(message, IN_A_THREAD)
        return
    if not isinstance(channel, discord.TextChannel):
        return  # a voice channel's chat and the like: no thread can be opened there
    try:
        await _start(account, client, message, channel)
    except Exception:
        _log.error("mention.start_failed", message_id=message.id, exc_info=True)
        await _reply(message, UNEXPECTED)


async def _start(
    account: AccountRuntime,
    client: discord.Client,
    message: discord.Message,
    channel: discord.TextChannel,
) -> None:
    author = message.author
    if not isinstance(author, discord.Member) or not (
        channel.permissions_for(author).use_application_commands
    ):
        await _reply(message, NO_RIGHT)
        return
    task = task_of(client, message)
    if not task:
        name = client.user.display_name if client.user is not None else "the bot"
        await _reply(message, EMPTY_MENTION.format(name=name))
        return
    request = SpawnCommand(
        guild_id=channel.guild.id,
        channel=channel,
        user_id=author.id,
        user_name=author.display_name,
        task=task,
        mode="session",
    )
    try:
        result = await plan(account, request).run()
    except ThreadboundError as exc:
        await _reply(message, NOT_STARTED.format(reason=exc))
        return
    _log.info(
        "mention.started",
        message_id=message.id,
        session_key=result.session_key,
        thread_id=result.thread_id,
    )
    await _reply(message, result.message + (FILES_LEFT if message.attachments else ""))


async def _reply(message: discord.Message, text: str) -> None:
    """Answer under the message, pinging nobody; a reply Discord refuses is logged."""
    try:
        await message.reply(text[:2000], allowed_mentions=_NO_MENTIONS, mention_author=False)
    except (discord.HTTPException, RuntimeError):  # RuntimeError: the client closed
        _log.warning("mention.reply_failed", message_id=message.id, exc_info=True)
