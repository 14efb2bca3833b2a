"""Which key names hold secrets: one answer for the config file and for log lines.

The config loader refuses such keys in ``config.toml`` and the log redactor masks
their values; both ask :func:`is_secret_key`, so a name the file may not hold is
also a name no log line shows. Kept in its own dependency-free module so loading
the config does not import the logging stack.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["SECRET_KEY_NAMES", "is_secret_key"]

SECRET_KEY_NAMES: Final = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "apikey",
        "api_key",
        "authorization",
        "private_key",
        "webhook_url",
    }
)
"""Snake-case names that mark a secret, alone or as the last words of a key."""

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_secret_key(key: str) -> bool:
    """Whether a key names a secret: ``token``, ``bot_token``, ``apiKey``, ``client-secret``.

    The key (camelCase and ``-`` normalised to snake_case, case-insensitively) must
    be one of :data:`SECRET_KEY_NAMES` or end with ``_`` plus one of them. Matching
    whole trailing words keeps ``token_env`` (a variable's *name*), ``max_tokens``
    and ``token_count`` (usage figures) visible.
    """
    norm = _CAMEL.sub("_", key).lower().replace("-", "_")
    if norm in SECRET_KEY_NAMES:
        return True
    return any(norm.endswith("_" + name) for name in SECRET_KEY_NAMES)
