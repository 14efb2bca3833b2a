"""Discord's error responses: an HTTP status plus a JSON ``{"message", "code"}`` body.

The codes are the ones the bot branches on (see the adapter's thread validation), so
they are named here once and every route raises :class:`DiscordError` with them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CANNOT_EDIT_OTHERS_MESSAGE",
    "EMPTY_MESSAGE",
    "INTERACTION_ALREADY_ACKNOWLEDGED",
    "INVALID_FORM_BODY",
    "MAX_PINS",
    "MISSING_ACCESS",
    "MISSING_PERMISSIONS",
    "REQUEST_TOO_LARGE",
    "THREAD_ARCHIVED",
    "UNAUTHORIZED",
    "UNKNOWN_APPLICATION_COMMAND",
    "UNKNOWN_CHANNEL",
    "UNKNOWN_EMOJI",
    "UNKNOWN_GUILD",
    "UNKNOWN_INTERACTION",
    "UNKNOWN_MEMBER",
    "UNKNOWN_MESSAGE",
    "UNKNOWN_USER",
    "UNKNOWN_WEBHOOK",
    "WRONG_CHANNEL_TYPE",
    "DiscordError",
    "default_message",
]

UNAUTHORIZED = 0
MAX_PINS = 30003
UNKNOWN_CHANNEL = 10003
UNKNOWN_GUILD = 10004
UNKNOWN_MEMBER = 10007
UNKNOWN_MESSAGE = 10008
UNKNOWN_USER = 10013
UNKNOWN_EMOJI = 10014
UNKNOWN_WEBHOOK = 10015
UNKNOWN_INTERACTION = 10062
UNKNOWN_APPLICATION_COMMAND = 10063
REQUEST_TOO_LARGE = 40005
INTERACTION_ALREADY_ACKNOWLEDGED = 40060
MISSING_ACCESS = 50001
CANNOT_EDIT_OTHERS_MESSAGE = 50005
EMPTY_MESSAGE = 50006
MISSING_PERMISSIONS = 50013
WRONG_CHANNEL_TYPE = 50024
INVALID_FORM_BODY = 50035
THREAD_ARCHIVED = 50083

_MESSAGES = {
    UNKNOWN_CHANNEL: "Unknown Channel",
    UNKNOWN_GUILD: "Unknown Guild",
    UNKNOWN_MEMBER: "Unknown Member",
    UNKNOWN_MESSAGE: "Unknown Message",
    UNKNOWN_USER: "Unknown User",
    UNKNOWN_EMOJI: "Unknown Emoji",
    UNKNOWN_WEBHOOK: "Unknown Webhook",
    UNKNOWN_INTERACTION: "Unknown interaction",
    UNKNOWN_APPLICATION_COMMAND: "Unknown application command",
    REQUEST_TOO_LARGE: "Request entity too large",
    INTERACTION_ALREADY_ACKNOWLEDGED: "Interaction has already been acknowledged.",
    MAX_PINS: "Maximum number of pins reached (50)",
    MISSING_ACCESS: "Missing Access",
    CANNOT_EDIT_OTHERS_MESSAGE: "Cannot edit a message authored by another user",
    EMPTY_MESSAGE: "Cannot send an empty message",
    MISSING_PERMISSIONS: "Missing Permissions",
    WRONG_CHANNEL_TYPE: "Cannot execute action on this channel type",
    INVALID_FORM_BODY: "Invalid Form Body",
    THREAD_ARCHIVED: "Thread is archived",
}


def default_message(status: int, code: int) -> str:
    """Discord's wording for ``code``, or its generic ``"<status>: <reason>"`` form."""
    if code in _MESSAGES:
        return _MESSAGES[code]
    reasons = {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        413: "Payload Too Large",
    }
    return f"{status}: {reasons.get(status, 'Error')}"


class DiscordError(Exception):
    """An error response, raised anywhere inside a route and rendered by the middleware.

    Args:
        status: the HTTP status (400, 401, 403, 404, 5xx).
        code: Discord's JSON error code (0 when Discord gives none).
        message: overrides Discord's usual wording for the code.
    """

    def __init__(self, status: int, code: int = 0, message: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message or default_message(status, code)
        super().__init__(f"{status} {self.message} (code {code})")

    def body(self) -> dict[str, Any]:
        """The JSON body Discord sends for this error."""
        return {"message": self.message, "code": self.code}
