"""Build the provider a ``[providers.<name>]`` table describes, reading its key now.

The table itself (:class:`core.config.ProviderConfig`) lives with the other TOML
tables in :mod:`core.config.tables`, so loading the config never imports this
module or the HTTP client behind it. Like the Discord tokens, an API key never
appears in the file: the table names the environment variable that holds it
(``api_key_env``), and :func:`build_provider` reads it once, at start-up. A missing
variable is a configuration error then, not an HTTP 401 on the first message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import aiohttp

from core.config import ProviderConfig
from core.errors import ConfigError
from core.logging import register_secret
from core.providers.openai_compat import OpenAICompatibleProvider

__all__ = ["ENVIRONMENT_SOURCE", "build_provider"]

ENVIRONMENT_SOURCE: Final = "<environment>"


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
