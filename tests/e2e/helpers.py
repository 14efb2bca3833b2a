"""Assertions over everything the bot sent to the fake Discord, for any end-to-end test."""

from __future__ import annotations

import re
from typing import Any, Final

from fakediscord import FakeDiscord
from fakediscord.recording import RecordedRequest

__all__ = ["PINGS_NOBODY", "assert_pings_nobody", "message_payload"]

PINGS_NOBODY: Final = {"parse": []}
"""``discord.AllowedMentions.none()`` as sent: no @everyone, role or user ping."""

_MESSAGE_ROUTES: Final = (
    ("POST", re.compile(r"/channels/\d+/messages")),  # channel send
    ("PATCH", re.compile(r"/channels/\d+/messages/\d+")),  # message edit
    ("POST", re.compile(r"/channels/\d+/threads")),  # a forum post carries a message
    ("POST", re.compile(r"/webhooks/\d+/[^/]+")),  # webhook execute, interaction followup
    ("PATCH", re.compile(r"/webhooks/\d+/[^/]+/messages/[^/]+")),  # their edits, @original
    ("POST", re.compile(r"/interactions/\d+/[^/]+/callback")),
)

_CALLBACKS_WITH_A_MESSAGE: Final = {4, 7}
"""Interaction callback types that carry message content (reply, update); a deferral,
a pong or a modal cannot ping."""


def message_payload(request: RecordedRequest) -> dict[str, Any] | None:
    """The message a request creates or edits (where ``allowed_mentions`` belongs), or None."""
    body = request.json if isinstance(request.json, dict) else None
    if body is None or not any(
        request.method == method and route.fullmatch(request.path)
        for method, route in _MESSAGE_ROUTES
    ):
        return None
    if request.path.endswith("/callback"):
        return body.get("data") if body.get("type") in _CALLBACKS_WITH_A_MESSAGE else None
    if request.path.endswith("/threads"):
        message = body.get("message")
        return message if isinstance(message, dict) else None
    return body


def assert_pings_nobody(fake: FakeDiscord) -> list[RecordedRequest]:
    """Every message the bot created or edited so far was sent with mentions that ping nobody.

    Returns the requests checked, so a test can also assert the sweep saw what it meant to.
    """
    checked = [r for r in fake.requests if message_payload(r) is not None]
    loud = [
        f"{r.method} {r.path}: allowed_mentions={payload.get('allowed_mentions')!r}"
        for r in checked
        if (payload := message_payload(r)) is not None
        and payload.get("allowed_mentions") != PINGS_NOBODY
    ]
    assert not loud, "messages sent without allowed_mentions that ping nobody:\n" + "\n".join(loud)
    return checked
