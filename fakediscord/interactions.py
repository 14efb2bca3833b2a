"""Interactions: sending them to a bot, recording its answers, and a handle for tests.

The bot answers through three REST families: the callback (types 4, 5, 6, 7, 8, 9),
``@original`` (get/edit/delete the response message) and followups (a webhook keyed by
the application id and the interaction token). Every answer is appended to
``Interaction.responses`` in arrival order. Discord's rules that bots trip over are kept:
a second callback is 40060, a followup before any callback is an unknown webhook, the
first followup after a "thinking" defer replaces the loading message, and an autocomplete
interaction (type 4) is answered with its choices (callback type 8) and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fakediscord import payloads
from fakediscord.errors import (
    INTERACTION_ALREADY_ACKNOWLEDGED,
    INVALID_FORM_BODY,
    UNKNOWN_INTERACTION,
    UNKNOWN_MESSAGE,
    UNKNOWN_WEBHOOK,
    DiscordError,
)
from fakediscord.gateway import Gateway
from fakediscord.models import Attachment, Interaction, InteractionResponse, Message
from fakediscord.operations import Operations
from fakediscord.state import State

__all__ = ["InteractionHandle", "Interactions"]

Json = dict[str, Any]
APPLICATION_COMMAND, MESSAGE_COMPONENT, APPLICATION_COMMAND_AUTOCOMPLETE = 2, 3, 4
AUTOCOMPLETE_RESULT = 8
EPHEMERAL, LOADING = 1 << 6, 1 << 7
CHAT_INPUT_COMMAND_MESSAGE = 20


class Interactions:
    """Creates interactions and applies the bot's answers to them."""

    def __init__(self, state: State, gateway: Gateway, operations: Operations) -> None:
        self._state = state
        self._gateway = gateway
        self._ops = operations
        self._by_token: dict[str, int] = {}

    # creation (driver side)

    def send(
        self,
        *,
        type: int,
        application_id: int,
        guild_id: int,
        channel_id: int,
        user_id: int,
        data: Json,
        message: Message | None = None,
    ) -> Interaction:
        """Record an interaction and dispatch INTERACTION_CREATE to the app's bot.

        Only the session of the guild's shard gets it (see ``GatewaySession.wants``), as
        on Discord: a sharded bot answers each guild from the process holding its shard.
        """
        account = self._state.bot_by_user(application_id)
        sessions = [s for s in self._gateway.sessions.values() if s.user_id == account.user_id]
        if not sessions:
            raise RuntimeError(f"bot {account.user_id} is not connected to the gateway")
        if not any(s.wants(guild_id) for s in sessions):
            raise RuntimeError(
                f"no gateway session of bot {account.user_id} carries guild {guild_id}'s shard"
            )
        interaction = Interaction(
            id=self._state.new_id(),
            token=f"aW50ZXJhY3Rpb24{self._state.new_token()}",
            type=type,
            application_id=application_id,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            data=data,
            message_id=message.id if message else None,
        )
        self._state.interactions[interaction.id] = interaction
        self._by_token[interaction.token] = interaction.id
        payload = self._payload(interaction, account.user_id, message)
        self._gateway.dispatch(
            "INTERACTION_CREATE",
            lambda _: payload,
            guild_id=guild_id,
            intent=None,
            user_ids={account.user_id},
        )
        self._state.changed.notify()
        return interaction

    def _payload(self, interaction: Interaction, bot_id: int, message: Message | None) -> Json:
        state, guild_id = self._state, interaction.guild_id or 0
        channel = state.channel(interaction.channel_id)
        member = state.member(guild_id, interaction.user_id)
        payload: Json = {
            "id": str(interaction.id),
            "application_id": str(interaction.application_id),
            "type": interaction.type,
            "token": interaction.token,
            "version": 1,
            "data": interaction.data,
            "guild_id": str(guild_id),
            "guild": {"id": str(guild_id), "locale": "en-US", "features": []},
            "channel_id": str(channel.id),
            "channel": payloads.channel(channel)
            | {"permissions": str(state.permissions(guild_id, interaction.user_id))},
            "member": payloads.member(state, member)
            | {"permissions": str(state.permissions(guild_id, interaction.user_id))},
            "app_permissions": str(state.permissions(guild_id, bot_id)),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(guild_id)},
            "context": 0,
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if message is not None:
            payload["message"] = payloads.message(state, message, viewer_id=bot_id)
        return payload

    # answers (REST side)

    def by_callback(self, interaction_id: int, token: str) -> Interaction:
        interaction = self._state.interactions.get(interaction_id)
        if interaction is None or interaction.token != token:
            raise DiscordError(404, UNKNOWN_INTERACTION)
        return interaction

    def by_webhook(self, application_id: int, token: str) -> Interaction | None:
        """The interaction behind a followup webhook ``/webhooks/{app}/{token}``, if any.

        One loaded from a saved state is found by its token too (and remembered).
        """
        if token not in self._by_token:
            for known in self._state.interactions.values():
                if known.token == token:
                    self._by_token[token] = known.id
        interaction = self._state.interactions.get(self._by_token.get(token, 0))
        if interaction is None or interaction.application_id != application_id:
            return None
        return interaction

    def callback(
        self, interaction: Interaction, body: Json, attachments: list[Attachment] | None = None
    ) -> Message | None:
        """Apply an interaction callback; returns the message it created or changed.

        ``attachments`` are the request's files: a message answer (type 4) carries them,
        as ``/export``'s page does on Discord.
        """
        if interaction.acknowledged:
            raise DiscordError(400, INTERACTION_ALREADY_ACKNOWLEDGED)
        kind = int(body.get("type", 0))
        data: Json = body.get("data") or {}
        message: Message | None = None
        if (kind == AUTOCOMPLETE_RESULT) != (interaction.type == APPLICATION_COMMAND_AUTOCOMPLETE):
            raise DiscordError(
                400,
                INVALID_FORM_BODY,
                "Invalid Form Body (autocomplete is answered with type 8, and only it is)",
            )
        if kind == 4:
            message = self._respond(interaction, data, attachments=attachments)
        elif kind == 5:
            flags = LOADING | (int(data.get("flags") or 0) & EPHEMERAL)
            message = self._respond(interaction, {"flags": flags}, allow_empty=True)
            interaction.deferred_thinking = True
        elif kind in (6, 7) and interaction.type == MESSAGE_COMPONENT:
            message = self._state.messages.get(interaction.message_id or 0)
            if message is None:
                raise DiscordError(404, UNKNOWN_MESSAGE)
            interaction.original_message_id = message.id
            if kind == 7:
                self._ops.edit_message(message, data)
        elif kind not in (8, 9):
            raise DiscordError(
                400, INVALID_FORM_BODY, f"Invalid Form Body (type: {kind} is not valid here)"
            )
        self._record(interaction, "callback", body, message, callback_type=kind)
        return message

    def _respond(
        self,
        interaction: Interaction,
        data: Json,
        *,
        allow_empty: bool = False,
        attachments: list[Attachment] | None = None,
    ) -> Message:
        flags = int(data.get("flags") or 0)
        bot = self._state.bot_by_user(interaction.application_id)
        message = self._ops.post_message(
            interaction.channel_id,
            bot.user_id,
            data,
            type=CHAT_INPUT_COMMAND_MESSAGE
            if allow_empty or interaction.type == APPLICATION_COMMAND
            else 0,
            application_id=interaction.application_id,
            interaction_id=interaction.id,
            ephemeral=bool(flags & EPHEMERAL),
            attachments=attachments,
        )
        interaction.original_message_id = message.id
        return message

    def original(self, interaction: Interaction) -> Message:
        message = self._state.messages.get(interaction.original_message_id or 0)
        if message is None:
            raise DiscordError(404, UNKNOWN_MESSAGE)
        return message

    def edit_original(self, interaction: Interaction, body: Json) -> Message:
        message = self.original(interaction)
        if message.flags & LOADING:
            body = body | {"flags": message.flags & ~LOADING}
        self._ops.edit_message(message, body)
        self._record(interaction, "edit_original", body, message)
        return message

    def delete_original(self, interaction: Interaction) -> None:
        message = self.original(interaction)
        self._ops.delete_message(message)
        interaction.original_message_id = None
        self._record(interaction, "delete_original", {}, message)

    def followup(
        self, interaction: Interaction, body: Json, attachments: list[Attachment] | None = None
    ) -> Message:
        if not interaction.acknowledged:
            raise DiscordError(404, UNKNOWN_WEBHOOK)
        original = self._state.messages.get(interaction.original_message_id or 0)
        if interaction.deferred_thinking and original is not None and original.flags & LOADING:
            flags = original.flags & ~LOADING
            self._ops.edit_message(original, body | {"flags": flags})
            self._record(interaction, "followup", body, original)
            return original
        message = self._ops.post_message(
            interaction.channel_id,
            self._state.bot_by_user(interaction.application_id).user_id,
            body,
            application_id=interaction.application_id,
            interaction_id=interaction.id,
            ephemeral=bool(int(body.get("flags") or 0) & EPHEMERAL),
            attachments=attachments,
        )
        self._record(interaction, "followup", body, message)
        return message

    def followup_message(self, interaction: Interaction, message_id: int) -> Message:
        message = self._state.messages.get(message_id)
        if message is None or message.interaction_id != interaction.id:
            raise DiscordError(404, UNKNOWN_MESSAGE)
        return message

    def edit_followup(self, interaction: Interaction, message_id: int, body: Json) -> Message:
        message = self.followup_message(interaction, message_id)
        self._ops.edit_message(message, body)
        self._record(interaction, "edit_followup", body, message)
        return message

    def _record(
        self,
        interaction: Interaction,
        kind: str,
        body: Json,
        message: Message | None,
        *,
        callback_type: int | None = None,
    ) -> None:
        response = InteractionResponse(
            kind=kind,
            body=body,
            at=self._state.now(),
            callback_type=callback_type,
            message_id=message.id if message else None,
        )
        interaction.responses.append(response)
        self._state.changed.notify()


class InteractionHandle:
    """What a test gets back from ``invoke_command`` / ``click_button``."""

    def __init__(self, state: State, interaction: Interaction, *, wait_timeout: float) -> None:
        self._state = state
        self.interaction = interaction
        self.wait_timeout = wait_timeout
        """Seconds each ``wait_*`` may take before raising ``TimeoutError``."""

    @property
    def id(self) -> int:
        return self.interaction.id

    @property
    def responses(self) -> list[InteractionResponse]:
        return self.interaction.responses

    @property
    def callback(self) -> InteractionResponse | None:
        return next((r for r in self.responses if r.kind == "callback"), None)

    @property
    def followups(self) -> list[InteractionResponse]:
        return [r for r in self.responses if r.kind == "followup"]

    @property
    def original_message(self) -> Message | None:
        return self._state.messages.get(self.interaction.original_message_id or 0)

    async def wait_for(self, predicate: Callable[[Interaction], bool]) -> Interaction:
        """Wait until ``predicate(interaction)`` holds."""

        def probe() -> Interaction | None:
            return self.interaction if predicate(self.interaction) else None

        async with asyncio.timeout(self.wait_timeout):
            return await self._state.changed.wait_for(probe)

    async def wait_response(self) -> InteractionResponse:
        """Wait for the bot's callback (the first answer every interaction needs)."""
        await self.wait_for(lambda i: i.acknowledged)
        callback = self.callback
        assert callback is not None
        return callback

    async def wait_followups(self, count: int = 1) -> list[InteractionResponse]:
        """Wait until the bot has sent ``count`` followups."""
        await self.wait_for(lambda i: sum(r.kind == "followup" for r in i.responses) >= count)
        return self.followups
