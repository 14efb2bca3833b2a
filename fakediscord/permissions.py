"""Permission bits the fake hands out (Discord's values), and the default grants.

Bots get a managed role with what threadbound needs (threads, webhooks, messages) but not
Administrator, so a bot-side admin check cannot pass by accident.
"""

from __future__ import annotations

__all__ = ["ADMINISTRATOR", "ALL", "BOT_DEFAULT", "EVERYONE_DEFAULT", "PIN_MESSAGES"]

CREATE_INSTANT_INVITE = 1 << 0
ADMINISTRATOR = 1 << 3
ADD_REACTIONS = 1 << 6
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
MANAGE_MESSAGES = 1 << 13
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
MENTION_EVERYONE = 1 << 17
USE_EXTERNAL_EMOJIS = 1 << 18
CHANGE_NICKNAME = 1 << 26
MANAGE_WEBHOOKS = 1 << 29
USE_APPLICATION_COMMANDS = 1 << 31
MANAGE_THREADS = 1 << 34
CREATE_PUBLIC_THREADS = 1 << 35
CREATE_PRIVATE_THREADS = 1 << 36
SEND_MESSAGES_IN_THREADS = 1 << 38
PIN_MESSAGES = 1 << 51
"""Pinning and unpinning (split from Manage Messages in 2025; alone required since 2026).
Threads inherit it from their parent channel; Discord names no exception for a thread's
creator."""
BYPASS_SLOWMODE = 1 << 52

ALL = (1 << 53) - 1
"""Every permission bit Discord defines today; what Administrator and ownership imply."""

EVERYONE_DEFAULT = (
    CREATE_INSTANT_INVITE
    | ADD_REACTIONS
    | VIEW_CHANNEL
    | SEND_MESSAGES
    | EMBED_LINKS
    | ATTACH_FILES
    | READ_MESSAGE_HISTORY
    | USE_EXTERNAL_EMOJIS
    | CHANGE_NICKNAME
    | USE_APPLICATION_COMMANDS
    | CREATE_PUBLIC_THREADS
    | CREATE_PRIVATE_THREADS
    | SEND_MESSAGES_IN_THREADS
)
"""What ``@everyone`` may do in a fresh guild (Discord's defaults, roughly)."""

BOT_DEFAULT = EVERYONE_DEFAULT | MANAGE_MESSAGES | MANAGE_WEBHOOKS | MANAGE_THREADS
"""The bot's managed role: everyone's rights plus messages, webhooks and threads (not
Pin Messages: a bot gets it only where the guild grants it)."""
