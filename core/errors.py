"""The exception tree of threadbound.

Every error keeps its inputs as attributes and builds a full sentence that says
what went wrong and what to do, so a command handler can show ``str(exc)`` to a
user as it is. Messages never contain secrets.
"""

from __future__ import annotations

__all__ = [
    "BindingError",
    "ConfigError",
    "ConversationAlreadyBound",
    "DeliveryError",
    "FeatureDisabled",
    "ProviderError",
    "SchemaVersionError",
    "StoreError",
    "ThreadboundError",
]


class ThreadboundError(Exception):
    """Root of every error threadbound raises on purpose."""


class ConfigError(ThreadboundError):
    """The configuration file or environment is wrong.

    Args:
        path: the file that was read (or ``"<environment>"``).
        key_path: dotted key path of the bad value, ``""`` for the whole file.
        expected: what would have been accepted.
        problem: what was found instead.
    """

    def __init__(self, path: str, key_path: str, expected: str, problem: str = "") -> None:
        self.path = path
        self.key_path = key_path
        self.expected = expected
        self.problem = problem
        where = f"{path}: {key_path}" if key_path else path
        found = f" ({problem})" if problem else ""
        super().__init__(f"{where}: expected {expected}{found}")


class FeatureDisabled(ThreadboundError):
    """An action needs a feature flag that is off; the message names the flag."""

    def __init__(self, flag: str, action: str) -> None:
        self.flag = flag
        self.action = action
        super().__init__(f"{action} needs the flag {flag} to be true; an admin can turn it on.")


class StoreError(ThreadboundError):
    """The store cannot be opened or used."""


class SchemaVersionError(StoreError):
    """The database was written by a different schema version than this code knows."""

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"the database has schema version {found}, but this threadbound supports up to "
            f"{supported}; upgrade threadbound or point [store] url at another database."
        )


class BindingError(ThreadboundError):
    """A binding could not be created, found or ended."""


class ConversationAlreadyBound(BindingError):
    """The conversation is already bound to a session; one conversation, one session."""

    def __init__(self, conversation: str, session_key: str | None) -> None:
        self.conversation = conversation
        self.session_key = session_key
        owner = f" to session {session_key!r}" if session_key else ""
        super().__init__(
            f"conversation {conversation} is already bound{owner}; "
            "unbind it first or bind another conversation."
        )


class DeliveryError(ThreadboundError):
    """A message could not be delivered where it was routed."""


class ProviderError(ThreadboundError):
    """The model provider failed or answered something unusable."""
