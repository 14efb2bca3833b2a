"""``[providers.<name>]``: which model endpoint to call, and where its key lives.

Like the Discord tokens, an API key never appears in the file: the table names the
environment variable that holds it (``api_key_env``), and :func:`build_provider`
reads it once, at start-up. A missing variable is a configuration error then, not
an HTTP 401 on the first message.

```toml
[providers.local]
base_url = "http://127.0.0.1:11434/v1"   # Ollama; no key needed
model = "qwen2.5:7b"

[providers.openai]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
```
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

import aiohttp
from pydantic import Field, field_validator

from core._config_flags import TomlTable, invalid_value
from core.errors import ConfigError
from core.logging import register_secret
from core.providers.openai_compat import OpenAICompatibleProvider

__all__ = ["ENVIRONMENT_SOURCE", "ProviderConfig", "build_provider"]

ENVIRONMENT_SOURCE: Final = "<environment>"
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ProviderConfig(TomlTable):
    """One ``[providers.<name>]`` table."""

    kind: Literal["openai"] = "openai"
    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    timeout_s: Seconds = 120.0
    max_retries: int = Field(default=4, ge=0, le=10)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        """An http(s) API root without credentials; a trailing slash is dropped."""
        try:
            parts = urlsplit(value)
            has_credentials = bool(parts.username or parts.password)
        except ValueError:
            raise invalid_value("an http:// or https:// URL", "the URL cannot be parsed") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise invalid_value(
                "an http:// or https:// URL such as https://api.openai.com/v1",
                f"got scheme {parts.scheme!r}" if parts.scheme else "no scheme",
            )
        if has_credentials or parts.query or parts.fragment:
            raise invalid_value(
                "a URL without credentials, query or fragment; put the key in the "
                "environment variable named by api_key_env",
                "the URL has extra parts (not shown)",
            )
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _is_variable_name(cls, value: str | None) -> str | None:
        """Catch a key pasted where its variable's name belongs, without echoing it."""
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise invalid_value(
                "the NAME of an environment variable (letters, digits and '_'), "
                "e.g. OPENAI_API_KEY",
                "the value is not a variable name; if it is the key itself, move it into "
                "that environment variable (value not shown)",
            )
        return value


def build_provider(
    cfg: ProviderConfig,
    env: Mapping[str, str],
    *,
    name: str = "openai",
    session: aiohttp.ClientSession | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> OpenAICompatibleProvider:
    """The provider ``cfg`` describes, with its key read from ``env`` now.

    ``name`` is the table's name in ``[providers.<name>]``; it labels logs and errors.
    The key is registered with the log redactor, so it is masked even if some
    library logs it.

    Raises:
        ConfigError: ``api_key_env`` names a variable that is unset or empty.
    """
    api_key: str | None = None
    if cfg.api_key_env is not None:
        api_key = env.get(cfg.api_key_env) or None
        if api_key is None:
            raise ConfigError(
                ENVIRONMENT_SOURCE,
                f"providers.{name}.api_key_env",
                f"the environment variable {cfg.api_key_env} to hold the API key",
                "it is not set or is empty; set it, or remove api_key_env for a server "
                "that needs no key",
            )
        register_secret(api_key)
    return OpenAICompatibleProvider(
        base_url=cfg.base_url,
        model=cfg.model,
        api_key=api_key,
        name=name,
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        session=session,
        sleep=sleep,
        api_key_env=cfg.api_key_env,
    )
