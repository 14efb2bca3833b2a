"""Who speaks for a persona in a Matrix room: a virtual user of its own, or the bot itself.

Matrix has no webhooks: a message's sender is an account. With an application
service registered on the homeserver (``appservice_registration``), each persona
speaks as a virtual user of the service's namespace, ``@tb_<name>:<server>``, made
on first use: registered, given the persona's display name and avatar, invited by
the bot into the room and joined. Its messages are sent with the service's token
and the user named in the request (``?user_id=``), so a reader sees Scout speak as
Scout, with Scout's name and picture, and one persona never as another.

Without a registration the bot's own account speaks, and the stream puts the
persona's name first in bold and in the per-message profile field
(:mod:`adapters.matrix.streaming`): :meth:`PersonaVoices.voice` then answers with the
bot's sender and the name to show.

What is made once (a registration, a profile, a membership) is remembered for the
life of the process; a restart finds it made and asks again cheaply (the homeserver
answers "in use" and "already joined").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import yaml
from mautrix.api import HTTPAPI, Method
from mautrix.api import Path as ApiPath
from mautrix.client import Client
from mautrix.errors import MatrixRequestError
from mautrix.types import RoomID, UserID

from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.sending import EventSender, MatrixSender
from core.bindings.records import BindingPersona
from core.errors import ConfigError, DeliveryError
from core.logging import get_logger, register_secret

__all__ = ["AppService", "PersonaVoices", "Voice", "localpart_of", "server_of"]

_log = get_logger("adapters.matrix.personas")

PREFIX: Final = "tb_"
"""The start of every persona's localpart: the service's namespace is ``@tb_.*``."""
AVATAR_LIMIT: Final = 1_000_000
"""Bytes of a persona's avatar fetched to upload (a profile picture, not a file)."""


@dataclass(frozen=True, slots=True)
class AppService:
    """An application service's registration, as far as the bot needs it."""

    id: str
    as_token: str = field(repr=False)
    sender_localpart: str
    user_patterns: tuple[str, ...]

    @classmethod
    def load(cls, path: Path) -> AppService:
        """Read a registration file (the YAML the homeserver is given).

        Raises:
            ConfigError: the file is missing, not YAML, or lacks what a service needs.
        """
        where = "appservice_registration"
        expected = "an application service registration (YAML with id, as_token, sender_localpart)"
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(str(path.name), where, expected, type(exc).__name__) from exc
        if not isinstance(data, dict):
            raise ConfigError(str(path.name), where, expected, "not a mapping")
        missing = [k for k in ("id", "as_token", "sender_localpart") if not data.get(k)]
        if missing:
            raise ConfigError(str(path.name), where, expected, f"no {', '.join(missing)}")
        users = (data.get("namespaces") or {}).get("users") or []
        patterns = tuple(str(u["regex"]) for u in users if isinstance(u, dict) and "regex" in u)
        service = cls(
            id=str(data["id"]),
            as_token=str(data["as_token"]),
            sender_localpart=str(data["sender_localpart"]),
            user_patterns=patterns,
        )
        register_secret(service.as_token)  # never in a log line
        return service

    def owns(self, user_id: str) -> bool:
        """Whether ``user_id`` is in the service's user namespace."""
        return any(re.fullmatch(pattern, user_id) for pattern in self.user_patterns)


def server_of(user_id: str) -> str:
    """The server name of a user id: ``example.org`` of ``@threadbound:example.org``."""
    return user_id.split(":", 1)[1]


def localpart_of(name: str) -> str:
    """The virtual user's localpart for a persona called ``name``: ``tb_`` and the name
    in the characters a localpart allows; a name with none of them, by its hash."""
    slug = re.sub(r"[^a-z0-9._=-]+", "_", name.lower()).strip("_")
    if not slug:
        slug = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{PREFIX}{slug}"[:200]


@dataclass(frozen=True, slots=True)
class Voice:
    """Who sends a persona's messages: ``sender``; ``name`` is shown in the text when the
    sender is the bot speaking for it (None when the persona speaks as itself)."""

    sender: MatrixSender
    name: str | None
    user_id: str


class PersonaVoices:
    """One account's personas: each its own virtual user with a service, else the bot."""

    def __init__(
        self,
        client: Client,
        bot: MatrixSender,
        *,
        server_name: str,
        service: AppService | None = None,
    ) -> None:
        self._client = client
        self._bot = bot
        self._server = server_name
        self._service = service
        self._api = (
            None
            if service is None
            else HTTPAPI(
                client.api.base_url, token=service.as_token, client_session=client.api.session
            )
        )
        self._senders: dict[str, MatrixSender] = {}
        self._profiled: set[str] = set()
        self._joined: set[tuple[str, str]] = set()

    @property
    def virtual(self) -> bool:
        """Whether personas speak as users of their own."""
        return self._service is not None

    def user_id_of(self, persona: BindingPersona) -> str:
        """The account a persona speaks as (the bot's, without a service)."""
        if self._service is None:
            return str(self._client.mxid)
        return f"@{localpart_of(persona.shown_name)}:{self._server}"

    def sender_for(self, persona: BindingPersona, room_id: str) -> tuple[EventSender, str | None]:
        """What sends ``persona``'s messages in ``room_id``, and the name to show in their
        text (None when it speaks as itself). Its virtual user is made on the first send,
        so a caller that cannot wait (an agent's listener) can hand it to a stream."""
        if self._service is None:
            return self._bot, persona.shown_name
        return _PersonaSender(self, persona, room_id), None

    async def voice(self, persona: BindingPersona, room_id: str) -> Voice:
        """The voice of ``persona`` in ``room_id``, its virtual user made and in the room.

        Raises:
            DeliveryError: the homeserver refused to make the user or let it in.
        """
        if self._service is None:
            return Voice(self._bot, persona.shown_name, str(self._client.mxid))
        user_id = self.user_id_of(persona)
        if not self._service.owns(user_id):
            raise DeliveryError(
                f"{user_id} is outside the application service's user namespace "
                f"(its registration's namespaces.users must match @{PREFIX}.*)",
                path="bot",
            )
        try:
            if user_id not in self._profiled:
                await self._register(user_id)
                await self._profile(user_id, persona)
                self._profiled.add(user_id)
            if (user_id, room_id) not in self._joined:
                await self._join(user_id, room_id)
                self._joined.add((user_id, room_id))
        except MATRIX_FAILURES as exc:
            raise DeliveryError(
                f"the persona {persona.shown_name} could not be made to speak in {room_id} "
                f"({matrix_said(exc)})",
                path="bot",
            ) from exc
        sender = self._senders.get(user_id)
        if sender is None:
            sender = MatrixSender(self._client, token=self._service.as_token, as_user=user_id)
            self._senders[user_id] = sender
        return Voice(sender, None, user_id)

    # -- made once ---------------------------------------------------------------------

    async def _as_service(
        self, method: Method, path: Any, content: dict[str, Any] | None = None, **query: str
    ) -> Any:
        """A request with the service's token (``user_id``: as which of its users)."""
        assert self._api is not None
        return await self._api.request(method, path, content, query_params=query or None)

    async def _register(self, user_id: str) -> None:
        localpart = user_id[1:].split(":", 1)[0]
        try:
            await self._as_service(
                Method.POST,
                ApiPath.v3.register,
                {"type": "m.login.application_service", "username": localpart},
                kind="user",
            )
            _log.info("matrix.persona_registered", user_id=user_id)
        except MatrixRequestError as exc:
            if getattr(exc, "errcode", None) != "M_USER_IN_USE":
                raise

    async def _profile(self, user_id: str, persona: BindingPersona) -> None:
        path = ApiPath.v3.profile[UserID(user_id)]
        await self._as_service(
            Method.PUT, path.displayname, {"displayname": persona.shown_name}, user_id=user_id
        )
        avatar = await self._avatar(persona.avatar_url)
        if avatar is not None:
            await self._as_service(
                Method.PUT, path.avatar_url, {"avatar_url": avatar}, user_id=user_id
            )

    async def _avatar(self, url: str | None) -> str | None:
        """The persona's picture as a Matrix content address: an ``mxc://`` one as it is,
        a web one fetched and uploaded once; None when there is none or it failed."""
        if not url:
            return None
        if url.startswith("mxc://"):
            return url
        try:
            session = self._client.api.session
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as response:
                response.raise_for_status()
                data = await response.content.read(AVATAR_LIMIT + 1)
                kind = response.headers.get("Content-Type", "application/octet-stream")
            if len(data) > AVATAR_LIMIT:
                raise ValueError(f"larger than {AVATAR_LIMIT} bytes")
            return str(await self._client.upload_media(data, mime_type=kind))
        except (*MATRIX_FAILURES, ValueError) as exc:
            _log.warning("matrix.persona_avatar_failed", error=f"{type(exc).__name__}: {exc}")
            return None

    async def _join(self, user_id: str, room_id: str) -> None:
        room = RoomID(room_id)
        try:
            await self._client.invite_user(room, UserID(user_id))
        except MatrixRequestError as exc:
            # already in (or invited): the join below says which
            _log.debug("matrix.persona_invite", user_id=user_id, error=matrix_said(exc))
        await self._as_service(Method.POST, ApiPath.v3.rooms[room].join, {}, user_id=user_id)


class _PersonaSender:
    """Sends as a persona's virtual user, made (once) before its first send."""

    def __init__(self, voices: PersonaVoices, persona: BindingPersona, room_id: str) -> None:
        self._voices = voices
        self._persona = persona
        self._room_id = room_id

    async def send(
        self, room_id: str, content: Mapping[str, Any], /, *, txn: str, event_type: str = ""
    ) -> str:
        voice = await self._voices.voice(self._persona, self._room_id)
        return await voice.sender.send(room_id, content, txn=txn, event_type=event_type)
