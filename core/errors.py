"""The exception tree of threadbound.

Every error keeps its inputs as attributes and builds a full sentence that says
what went wrong and what to do, so a command handler can show ``str(exc)`` to a
user as it is. Messages never contain secrets.
"""

from __future__ import annotations

import re

__all__ = [
    "ArtifactError",
    "BindingError",
    "ConfigError",
    "ConversationAlreadyBound",
    "DeliveryError",
    "FeatureDisabled",
    "HandoffError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderUnavailable",
    "SchemaVersionError",
    "SessionError",
    "StoreError",
    "ThreadboundError",
    "got",
]

_HARMLESS = re.compile(r"[A-Za-z0-9 _.:/+-]{0,24}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")


def got(value: object) -> str:
    """``got 'verbose'`` for an error message, unless the value could be a secret.

    People paste tokens into the wrong key or command option. A number, or a
    short word such as a log level or a provider name, is echoed so the user sees
    their typo; a long string, one with unusual characters, or a long mix of
    letters and digits is described by its length only.
    """
    if isinstance(value, bool | int | float) or value is None:
        return f"got {value!r}"
    text = str(value)
    credential_like = len(text) >= 12 and _LETTER.search(text) and _DIGIT.search(text)
    if _HARMLESS.fullmatch(text) and not credential_like:
        return f"got {text!r}"
    return f"got a value of {len(text)} characters, not shown in case it is a secret"


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
    """A message could not be delivered where it was routed.

    Args:
        path: the way it last tried (``webhook`` or ``bot``), when one was tried.
        code: the platform's error code (Discord's ``50013``...), when it gave one.
    """

    def __init__(self, message: str = "", *, path: str | None = None, code: int | None = None):
        super().__init__(message)
        self.path = path
        self.code = code


class ProviderError(ThreadboundError):
    """The model provider failed or answered something unusable."""


class SessionError(ThreadboundError):
    """A session event could not be appended, found or replayed.

    Raised for unknown node ids or bookmark labels, payloads that do not fit
    their event type, and logs that disagree with themselves; the message
    names the session and the offending input.

    Args:
        message: the full sentence shown to the user.
        session_key: the session concerned, when there is one.
        ref: the node id, bookmark label or event type that was not accepted.
    """

    def __init__(
        self, message: str, *, session_key: str | None = None, ref: str | None = None
    ) -> None:
        self.session_key = session_key
        self.ref = ref
        super().__init__(message)


def _provider_label(provider: str | None) -> str:
    return f"provider {provider!r}" if provider else "the provider"


class ProviderHTTPError(ProviderError):
    """The provider refused the request with a status that retrying cannot fix (a 4xx).

    Never retried: the same request would be refused again. The message names the
    setting to check; ``body_excerpt`` is the server's own error text, shortened and
    with the API key removed by the caller.

    Args:
        status: the HTTP status code.
        body_excerpt: the server's error message (or the start of its body).
        provider: the provider's configured name (``[providers.<name>]``).
        api_key_env: name of the environment variable the key was read from, if known.
        model: the model that was requested, if known.
    """

    def __init__(
        self,
        status: int,
        body_excerpt: str,
        provider: str,
        *,
        api_key_env: str | None = None,
        model: str | None = None,
    ) -> None:
        self.status = status
        self.body_excerpt = body_excerpt
        self.provider = provider
        self.api_key_env = api_key_env
        self.model = model
        label = _provider_label(provider)
        said = f": {body_excerpt}" if body_excerpt else ""
        if status in (401, 403):
            where = (
                f"the environment variable {api_key_env}"
                if api_key_env
                else "the environment variable named by api_key_env"
            )
            advice = f"check the API key in {where} for [providers.{provider}]"
            message = f"{label} refused the request with HTTP {status}{said}; {advice}."
        elif status == 404:
            wanted = f" (model {model!r})" if model else ""
            message = (
                f"{label} answered HTTP 404{said}; check base_url (it usually ends in /v1) "
                f"and the model name{wanted} in [providers.{provider}]."
            )
        elif status == 400:
            message = (
                f"{label} rejected the request as invalid (HTTP 400){said}; "
                "check the model's support for tools and the provider settings."
            )
        else:
            message = (
                f"{label} refused the request with HTTP {status}{said}; "
                f"retrying will not help, check [providers.{provider}]."
            )
        super().__init__(message)


class ProviderUnavailable(ProviderError):
    """The provider could not be reached or kept failing; the request may succeed later.

    Raised after the retries are spent, and also (with ``partial=True``) when a stream
    broke off after events had already been handed to the consumer: that cannot be
    retried transparently because the consumer has seen part of an answer.

    Args:
        attempts: how many requests were made.
        last_status: the HTTP status of the last failed attempt, if it got one.
        last_error: a short description of the last failure without a status.
        provider: the provider's configured name.
        partial: the stream failed after part of the answer was delivered.
    """

    def __init__(
        self,
        attempts: int,
        last_status: int | None = None,
        last_error: str | None = None,
        *,
        provider: str | None = None,
        partial: bool = False,
    ) -> None:
        self.attempts = attempts
        self.last_status = last_status
        self.last_error = last_error
        self.provider = provider
        self.partial = partial
        label = _provider_label(provider)
        if last_status is not None:
            last = f"HTTP {last_status}" + (f", {last_error}" if last_error else "")
        else:
            last = last_error or "unknown error"
        if partial:
            message = (
                f"the answer from {label} broke off after it had started ({last}); "
                "a partial answer cannot be resumed, so send the message again."
            )
        else:
            tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
            message = (
                f"{label} did not answer after {tries} (last: {last}); check that the "
                "server at base_url is running and reachable, or try again later."
            )
        super().__init__(message)


class ProviderProtocolError(ProviderError):
    """The provider answered something that is not a readable chat-completions stream.

    Args:
        detail: what was wrong, as a sentence fragment.
        provider: the provider's configured name, if known.
    """

    def __init__(self, detail: str, *, provider: str | None = None) -> None:
        self.detail = detail
        self.provider = provider
        super().__init__(
            f"{_provider_label(provider)} sent an answer threadbound cannot read: {detail}; "
            "check that base_url points at an OpenAI-compatible endpoint (usually ending in /v1)."
        )


class HandoffError(ThreadboundError):
    """A handoff cannot make the transition asked for, or does not exist.

    Legal transitions are offered -> accepted | rejected and accepted -> completed.

    Args:
        handoff_id: the handoff concerned.
        from_status: its current status, ``None`` when no such handoff exists.
        to_status: the status that was asked for.
        allowed: the statuses it may move to from ``from_status``.
    """

    def __init__(
        self,
        handoff_id: str,
        *,
        from_status: str | None,
        to_status: str,
        allowed: tuple[str, ...] = (),
    ) -> None:
        self.handoff_id = handoff_id
        self.from_status = from_status
        self.to_status = to_status
        self.allowed = allowed
        if from_status is None:
            message = (
                f"handoff {handoff_id!r} does not exist in this session, so it cannot become "
                f"{to_status}; list the session's handoffs to find the right id."
            )
        else:
            options = " or ".join(allowed) if allowed else "nothing (it is final)"
            message = (
                f"handoff {handoff_id!r} is {from_status} and cannot become {to_status}; "
                f"from {from_status} it can only become {options}."
            )
        super().__init__(message)


class ArtifactError(ThreadboundError):
    """An artifact was refused: unknown or disallowed type, bad data, or a bad origin.

    Args:
        artifact_type: the artifact type that was asked for.
        reason: why it was refused, as a sentence fragment that says what to do.
    """

    def __init__(self, artifact_type: str, reason: str) -> None:
        self.artifact_type = artifact_type
        self.reason = reason
        super().__init__(f"artifact type {artifact_type!r} refused: {reason}")
