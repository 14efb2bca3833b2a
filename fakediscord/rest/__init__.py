"""The REST half of the fake Discord: ``/api/v10`` routes (and the CDN) on an aiohttp app."""

from __future__ import annotations

from aiohttp import web

from fakediscord.rest import cdn, channels, meta, webhooks
from fakediscord.rest._app import API, API_KEY, Api, middleware

__all__ = ["API", "API_KEY", "Api", "build_app"]


def build_app(api: Api) -> web.Application:
    """The aiohttp application serving REST under ``/api/v10``, the gateway websocket and
    attachment files under ``/attachments`` (the fake's CDN)."""
    app = web.Application(middlewares=[middleware], client_max_size=64 * 1024 * 1024)
    app[API_KEY] = api
    app.router.add_get("/gateway", api.gateway.handle)
    app.router.add_get("/gateway/", api.gateway.handle)
    for module in (meta, channels, webhooks, cdn):
        app.router.add_routes(module.routes)
    return app
