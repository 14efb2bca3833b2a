"""Secret redaction for every log line: the :class:`RedactSecrets` processor.

Kept apart from :mod:`core.logging` because it is its own idea (how to find a
secret inside any string) and most of the code; the logging pipeline only places
the processor in its chain. Which *key names* are secret is decided by
:func:`core.secret_keys.is_secret_key`, the same function the config loader uses
to refuse such keys in the file; it is re-exported here and from
:mod:`core.logging`. Import these names from :mod:`core.logging`.

The secret registry is module state here and only here: :func:`register_secret`
adds to it, every :class:`RedactSecrets` built with ``use_registry=True`` reads
it, and :func:`core.logging.reset_logging` empties it via :func:`forget_secrets`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final

from structlog.typing import EventDict, WrappedLogger

from core.secret_keys import is_secret_key

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "RedactSecrets",
    "forget_secrets",
    "is_secret_key",
    "redact_text",
    "register_secret",
]

REDACTED: Final = "[redacted]"
MIN_SECRET_LENGTH: Final = 8
"""Registered secrets shorter than this are ignored: they would redact ordinary words."""

_PROCESSOR_META_KEYS: Final = frozenset({"_record", "_from_structlog"})
_SCALARS: Final = (int, float, bool, type(None))

# ---------------------------------------------------------------------------
# Secret strings and the patterns that find them inside any string value.
# Each alternative is "kept prefix" (a named group k_*) followed by the secret,
# so the replacement is always prefix + REDACTED.
_B64URL = r"A-Za-z0-9_\-"
# A Discord bot token (or a JWT): three base64url parts, the first >= 20 chars.
_TOKEN_SHAPE_RE: Final = (
    rf"(?<![{_B64URL}])[{_B64URL}]{{20,}}\.[{_B64URL}]{{4,}}\.[{_B64URL}]{{16,}}(?![{_B64URL}])"
)
# Starts with a literal, so the regex engine jumps from dot to dot: a fast pre-check.
_TOKEN_HINT: Final = re.compile(rf"\.[{_B64URL}]{{4,}}\.[{_B64URL}]{{16}}")
_TRIGGERS: Final = (
    "webhooks/",
    "authoriz",
    "bot ",
    "bearer ",
    "token",
    "passw",
    "secret",
    "api_key",
    "apikey",
)
"""Lower-case substrings one of which every fixed pattern needs (the token shape aside)."""
_FIXED_PATTERNS: Final = (
    # The token part of a webhook URL or path; the webhook id stays readable.
    rf"(?P<k_webhook>(?<![A-Za-z0-9_])webhooks/\d+/)[{_B64URL}]+",
    # An Authorization header or field, with or without an auth scheme.
    r"(?P<k_auth>(?i:authorization)[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:Bot|Bearer|Basic|bot|bearer|basic)\s+)?)[^\s\"',;}\]]+",
    # `Bot <x>` / `Bearer <x>` where x looks like a credential, not a word.
    r"(?P<k_scheme>(?:Bot|Bearer|bearer) +)"
    r"(?=[A-Za-z0-9._\-+/=~]*[0-9_\-+/=~])[A-Za-z0-9._\-+/=~]{8,}",
    # A secret-looking key inside text: `token=x`, `bot_token = x`, `'password': 'x'`.
    r"(?P<k_kv>(?:(?<![A-Za-z0-9])(?:[A-Za-z0-9]+_)?(?i:token|password|passwd|secret|api_?key)"
    r"\s*=\s*[\"']?|[\"'](?:[A-Za-z0-9]+_)?(?i:token|password|passwd|secret|api_?key)[\"']"
    r"\s*:\s*[\"']?))[^\s\"',;&}\]]+",
    _TOKEN_SHAPE_RE,
)
_KEPT_GROUPS: Final = ("k_webhook", "k_auth", "k_scheme", "k_kv")


def _compile(secrets: Iterable[str]) -> re.Pattern[str]:
    """One alternation, registered secrets first (longest first, so none is cut short)."""
    literal = "|".join(re.escape(s) for s in sorted(set(secrets), key=len, reverse=True))
    parts = ([f"(?:{literal})"] if literal else []) + list(_FIXED_PATTERNS)
    return re.compile("|".join(parts))


def _replace(match: re.Match[str]) -> str:
    for name in _KEPT_GROUPS:
        kept = match.group(name)
        if kept is not None:
            return kept + REDACTED
    return REDACTED


class _SecretRegistry:
    """The exact secrets (bot tokens, API keys) the config layer registers at start-up.

    Registration is rare and reads are hot, so readers compare a version number
    and only recompile when it moved.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.secrets: frozenset[str] = frozenset()
        self.version = 0

    def add(self, value: str) -> bool:
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
            return False
        with self._lock:
            if value in self.secrets:
                return False
            self.secrets = self.secrets | {value}
            self.version += 1
        return True

    def clear(self) -> None:
        with self._lock:
            self.secrets = frozenset()
            self.version += 1


_REGISTRY = _SecretRegistry()


def register_secret(value: str) -> bool:
    """Redact ``value`` wherever it appears in any later log line.

    The config layer calls this with bot tokens and provider API keys. Values
    shorter than 8 characters are ignored (returns False) because redacting
    them would mangle ordinary words.
    """
    return _REGISTRY.add(value)


def forget_secrets() -> None:
    """Empty the registry; :func:`core.logging.reset_logging` calls this between tests."""
    _REGISTRY.clear()


class RedactSecrets:
    """Processor: replace secrets in an event dict with ``"[redacted]"``.

    (a) The value of any key that :func:`is_secret_key` flags, at any depth of
    nested dicts and lists. (b) Inside every string value (the ``event`` message
    and a formatted ``exception`` included): registered secrets, Discord
    bot-token-shaped strings, ``Bot``/``Bearer`` credentials, ``Authorization``
    values, webhook URL tokens and ``token=...``-style pairs. Other objects are
    rendered with ``repr()`` first so nothing reaches the renderer unscanned.

    Args:
        secrets: exact strings to redact besides the registered ones.
        use_registry: also redact what :func:`register_secret` registered.
    """

    def __init__(self, *, secrets: Iterable[str] = (), use_registry: bool = True) -> None:
        self._own = frozenset(s for s in secrets if len(s) >= MIN_SECRET_LENGTH)
        self._use_registry = use_registry
        self._version = -1
        self._secrets: tuple[str, ...] = tuple(self._own)
        self._pattern = _compile(self._own)
        self._key_cache: dict[str, bool] = {}

    def _refresh(self) -> None:
        if self._use_registry and self._version != _REGISTRY.version:
            self._version = _REGISTRY.version
            self._secrets = tuple(self._own | _REGISTRY.secrets)
            self._pattern = _compile(self._secrets)

    def _suspicious(self, text: str) -> bool:
        """A cheap superset test of the full pattern: plain substring searches, in C."""
        low = text.lower()
        for trigger in _TRIGGERS:
            if trigger in low:
                return True
        for secret in self._secrets:
            if secret in text:
                return True
        return "." in text and _TOKEN_HINT.search(text) is not None

    def _text(self, text: str) -> str:
        if len(text) >= MIN_SECRET_LENGTH and self._suspicious(text):
            return self._pattern.sub(_replace, text)
        return text

    def _secret_key(self, key: str) -> bool:
        hit = self._key_cache.get(key)
        if hit is None:
            if len(self._key_cache) > 4096:
                self._key_cache.clear()
            hit = self._key_cache[key] = is_secret_key(key)
        return hit

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, _SCALARS):
            return value
        if isinstance(value, Mapping):
            return {
                k: (
                    REDACTED
                    if isinstance(k, str) and self._secret_key(k) and v is not None
                    else self._value(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple | set | frozenset):
            return [self._value(v) for v in value]
        return self._text(repr(value))

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        self._refresh()
        cache = self._key_cache
        texts: list[str] = []
        for key, value in event_dict.items():
            if value is None or key in _PROCESSOR_META_KEYS:
                continue
            secret = cache.get(key)
            if secret is None:
                secret = self._secret_key(key)
            if secret:
                event_dict[key] = REDACTED
            elif type(value) is str:
                texts.append(value)
            elif not isinstance(value, _SCALARS):
                event_dict[key] = self._value(value)
        # One pre-check over all strings: most lines hold ids and names and no secret.
        if texts and self._suspicious("\x00".join(texts)):
            for key, value in event_dict.items():
                if type(value) is str and len(value) >= MIN_SECRET_LENGTH:
                    event_dict[key] = self._pattern.sub(_replace, value)
        return event_dict


_SHARED: Final = RedactSecrets()


def redact_text(text: str) -> str:
    """``text`` with every secret the log redaction would find replaced: for text a
    person will read (an error shown in a thread), which no log processor sees."""
    _SHARED._refresh()
    return _SHARED._text(text)
