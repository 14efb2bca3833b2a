"""The fake's CDN: attachment files served where the message payloads say they are.

``GET /attachments/{channel_id}/{attachment_id}/{filename}`` answers the stored bytes
with their content type, like ``cdn.discordapp.com``, so ``discord.Attachment.read()``
works against the fake. It lives outside ``/api/v10``: not recorded and no
authentication (CDN links are public), but a test's gates and faults apply to it, so
a slow or failing CDN can be played. Anything unknown, a deleted message's file or a
wrong filename included, is a plain 404.
"""

from __future__ import annotations

from aiohttp import web

from fakediscord.models import Attachment
from fakediscord.payloads import ATTACHMENTS
from fakediscord.rest._app import API_KEY
from fakediscord.state import State

__all__ = ["find_attachment", "routes"]

routes = web.RouteTableDef()
DEFAULT_CONTENT_TYPE = "application/octet-stream"


def find_attachment(state: State, channel_id: int, attachment_id: int) -> Attachment | None:
    """The attachment ``attachment_id`` of a message still in ``channel_id``, if any."""
    for message in state.messages_in(channel_id, include_ephemeral=True):
        for attachment in message.attachments:
            if attachment.id == attachment_id:
                return attachment
    return None


@routes.get(ATTACHMENTS + "/{channel_id}/{attachment_id}/{filename}")
async def get_attachment(request: web.Request) -> web.Response:
    channel_id = request.match_info["channel_id"]
    attachment_id = request.match_info["attachment_id"]
    found = None
    if channel_id.isdigit() and attachment_id.isdigit():
        found = find_attachment(request.app[API_KEY].state, int(channel_id), int(attachment_id))
    if found is None or found.filename != request.match_info["filename"]:
        return web.Response(status=404, text="404: Not Found")
    # a header, not content_type=: aiohttp refuses parameters (``; charset=``) there
    content_type = found.content_type or DEFAULT_CONTENT_TYPE
    return web.Response(body=found.data, headers={"Content-Type": content_type})
