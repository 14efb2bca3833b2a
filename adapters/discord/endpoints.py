"""Where discord.py connects: Discord itself, a REST proxy, or a local fake.

discord.py keeps both addresses in class attributes, so this is process-wide:
every account in the process talks to the same Discord. ``Route.BASE`` covers
REST and webhooks alike; a non-sharded client ignores ``/gateway`` and
connects to ``DiscordWebSocket.DEFAULT_GATEWAY``, so that constant is the
one to move.
"""

from __future__ import annotations

from dataclasses import dataclass

import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

__all__ = ["Endpoints", "current_endpoints", "use_endpoints"]


@dataclass(frozen=True, slots=True)
class Endpoints:
    api_base_url: str
    gateway_url: str


def current_endpoints() -> Endpoints:
    return Endpoints(Route.BASE, str(DiscordWebSocket.DEFAULT_GATEWAY))


def use_endpoints(api_base_url: str | None, gateway_url: str | None) -> Endpoints:
    """Point discord.py at other addresses (unset keeps Discord's); returns the previous ones.

    ``api_base_url`` includes the API version path, e.g. ``http://127.0.0.1:8080/api/v10``.
    """
    previous = current_endpoints()
    if api_base_url:
        Route.BASE = api_base_url.rstrip("/")
    if gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
    return previous
