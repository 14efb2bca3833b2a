"""A streaming client for OpenAI-compatible chat-completions endpoints.

One client serves OpenAI, OpenRouter, vLLM, Ollama (``http://127.0.0.1:11434/v1``)
and llama.cpp's server (``http://127.0.0.1:8080/v1``): it POSTs
``{base_url}/chat/completions`` with ``stream: true`` and reads the server-sent
events. The tolerant parsing of chunks is in :mod:`core.providers._openai_wire`
(tool-call deltas without ``id`` or ``index``, usage only in the last chunk, error
chunks inside a 200 stream, a server that answers with one JSON document).

What is retried, and what never is:

- Retried with exponential backoff and jitter, up to ``max_retries`` times, and
  only while *nothing has been yielded yet*: HTTP 429 (``Retry-After`` seconds are
  honoured, capped at ``backoff_max_s``), 500/502/503/504, connection errors and
  timeouts, and a body that ends before the server said it was done. When they
  are spent: :class:`~core.errors.ProviderUnavailable`.
- Never retried: other 4xx (:class:`~core.errors.ProviderHTTPError`; the same
  request would be refused again) and unreadable answers
  (:class:`~core.errors.ProviderProtocolError`).
- A stream that breaks off *after* events were yielded raises
  ``ProviderUnavailable(partial=True)`` at once: the consumer has already shown
  part of an answer, and a second request would produce a different one. Whether
  to ask again is the agent loop's decision, not the client's.

The API key is sent as ``Authorization: Bearer`` only when one is given (Ollama
and llama.cpp need none); neither the key nor the header is ever logged, and the
key is cut out of any error text the server echoes back.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import aiohttp

from core.errors import ProviderHTTPError, ProviderProtocolError, ProviderUnavailable
from core.logging import get_logger
from core.providers._openai_wire import (
    ChunkAssembler,
    StreamErrorChunk,
    encode_messages,
    encode_tools,
    error_message,
)
from core.providers._sse import SSEDecoder
from core.providers.types import ChatMessage, ProviderEvent, ToolSpec

__all__ = ["RETRYABLE_STATUSES", "OpenAICompatibleProvider"]

RETRYABLE_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
RESERVED_BODY_KEYS: Final = frozenset({"messages", "model", "stream", "tools"})
_EXCERPT_CHARS: Final = 300
_MALFORMED_EXCERPT_CHARS: Final = 80
_ERROR_BODY_BYTES: Final = 8192
_CUT_OFF: Final = "the connection closed before the answer was complete"
_log = get_logger("threadbound.providers")


@dataclass(frozen=True, slots=True)
class _Failure:
    """A retryable failure of one attempt."""

    status: int | None
    error: str | None
    retry_after: float | None = None


class _Retryable(Exception):
    """Raised inside an attempt for a failure that another attempt may not have."""

    def __init__(self, failure: _Failure) -> None:
        self.failure = failure
        super().__init__(failure.error or f"HTTP {failure.status}")


class OpenAICompatibleProvider:
    """A :class:`~core.providers.types.Provider` for any OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``.
        model: the model used when :meth:`stream` is not given one.
        api_key: sent as a bearer token; ``None`` sends no Authorization header.
        name: the configured name, used in logs and error messages.
        timeout_s: limit for connecting and for every wait for the next bytes
            (not for the whole answer, which may legitimately stream for minutes).
        max_retries: retries after the first attempt (so ``max_retries + 1`` requests).
        backoff_base_s / backoff_max_s: delay before retry *n* is
            ``min(backoff_max_s, backoff_base_s * 2**(n-1))``, scaled by a random
            factor in [0.5, 1) unless ``jitter`` is false.
        session: a shared ``aiohttp.ClientSession``; without one the provider opens
            its own on first use and :meth:`aclose` closes it.
        sleep: how to wait between retries (tests inject a recorder).
        extra_body: merged into every request body (``temperature``, Ollama
            ``options``...); a ``None`` value removes a key, e.g.
            ``{"stream_options": None}`` for a server that rejects it.
        api_key_env: the name of the key's environment variable, only for messages.
        jitter: randomise backoff delays (on by default; off makes delays exact).
        rng: the random source for jitter (seed one for reproducible delays).
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        name: str = "openai",
        timeout_s: float = 120,
        max_retries: int = 4,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20,
        session: aiohttp.ClientSession | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        extra_body: Mapping[str, Any] | None = None,
        api_key_env: str | None = None,
        jitter: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        reserved = RESERVED_BODY_KEYS.intersection(extra_body or {})
        if reserved:
            raise ValueError(
                f"extra_body cannot set {', '.join(sorted(reserved))}; "
                "pass messages, tools and model to stream() instead"
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, not {max_retries}")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key = api_key or None
        self._name = name
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeout_s, sock_read=timeout_s
        )
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._session = session
        self._owns_session = session is None
        self._sleep = sleep
        self._extra_body = dict(extra_body or {})
        self._api_key_env = api_key_env
        self._jitter = jitter
        self._rng = rng or random.Random()  # noqa: S311 - backoff jitter, not cryptography
        self._headers = {"Accept": "text/event-stream"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"

    def __repr__(self) -> str:
        # Spelled out so the key (and the headers holding it) can never show up in a repr.
        return f"OpenAICompatibleProvider(name={self._name!r}, url={self._url!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        """The model used when :meth:`stream` is not given one."""
        return self._model

    async def aclose(self) -> None:
        """Close the HTTP session if this provider opened it; a shared one is left alone."""
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> OpenAICompatibleProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Stream the model's answer to ``messages``; see the module docstring for retries.

        Raises:
            ProviderHTTPError: a 4xx other than 429.
            ProviderUnavailable: retries spent, or (``partial=True``) the stream broke
                off after events were yielded.
            ProviderProtocolError: the answer is not a chat-completions stream.
        """
        model = model or self._model
        body = self._body(messages, tools, model)
        attempt = 0
        while True:
            attempt += 1
            yielded = False
            _log.debug(
                "provider.request",
                provider=self._name,
                model=model,
                messages=len(messages),
                tools=len(tools),
                attempt=attempt,
            )
            try:
                async with self._client().post(
                    self._url, json=body, headers=self._headers, timeout=self._timeout
                ) as response:
                    if not 200 <= response.status < 300:
                        await self._refused(response, model)
                    if response.content_type == "application/json":
                        source = self._whole_answer(response)
                    else:
                        source = self._event_stream(response)
                    async with aclosing(source) as events:
                        async for event in events:
                            yielded = True
                            yield event
                return
            except _Retryable as exc:
                failure = exc.failure
            except StreamErrorChunk as exc:
                failure = self._error_chunk(exc, model)
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure = _Failure(None, _describe(exc))
            if yielded:
                _log.warning(
                    "provider.stream_broken",
                    provider=self._name,
                    status=failure.status,
                    error=failure.error,
                )
                raise ProviderUnavailable(
                    attempt, failure.status, failure.error, provider=self._name, partial=True
                )
            if attempt > self._max_retries:
                raise ProviderUnavailable(
                    attempt, failure.status, failure.error, provider=self._name
                )
            delay = self._delay(attempt, failure.retry_after)
            _log.warning(
                "provider.retry",
                provider=self._name,
                attempt=attempt,
                delay_s=round(delay, 3),
                status=failure.status,
                error=failure.error,
            )
            await self._sleep(delay)

    async def _event_stream(
        self, response: aiohttp.ClientResponse
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Events of a server-sent-events body, as they arrive.

        Closing this generator early (cancellation, ``aclose``) closes the connection
        at once, so the server stops generating for nobody.

        Raises:
            _Retryable: the body ended before ``[DONE]`` or a ``finish_reason``.
        """
        decoder = SSEDecoder()
        events = ChunkAssembler(self._name, self._on_malformed)
        finished = False
        try:
            while not events.saw_done:
                data = await response.content.readany()
                for payload in decoder.feed(data) if data else decoder.close():
                    if events.saw_done:
                        break  # anything after [DONE] is not part of the answer
                    for event in events.feed(payload):
                        yield event
                if not data:
                    break
            finished = True
        finally:
            if not finished:
                response.close()
        if not events.complete:
            raise _Retryable(self._cut_off(decoder, response.content_type))
        for event in events.finish():
            yield event

    # -- helpers -----------------------------------------------------------------

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            # No cap on connections: every live agent of the bot streams through this one
            # session, and aiohttp's default of 100 would queue the 101st agent's turn,
            # silently, until another's answer ended. The server says when it is too many
            # (429, retried with its Retry-After).
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    def _body(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], model: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": encode_messages(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = encode_tools(tools)
        for key, value in self._extra_body.items():
            if value is None:
                body.pop(key, None)
            else:
                body[key] = value
        return body

    async def _refused(self, response: aiohttp.ClientResponse, model: str) -> NoReturn:
        """Raise for an error status: _Retryable (429, 5xx) or ProviderHTTPError."""
        try:
            raw = await response.content.read(_ERROR_BODY_BYTES)
        except (aiohttp.ClientError, TimeoutError):
            raw = b""
        excerpt = self._excerpt(error_message(raw.decode("utf-8", errors="replace")))
        if response.status in RETRYABLE_STATUSES:
            failure = _Failure(response.status, excerpt or None, _retry_after(response.headers))
            raise _Retryable(failure)
        raise ProviderHTTPError(
            response.status, excerpt, self._name, api_key_env=self._api_key_env, model=model
        )

    async def _whole_answer(
        self, response: aiohttp.ClientResponse
    ) -> AsyncGenerator[ProviderEvent, None]:
        """A server that ignored ``stream: true`` and sent one JSON completion."""
        try:
            completion = await response.json()
        except ValueError:
            raise ProviderProtocolError(
                "the answer was labelled JSON but is not valid JSON", provider=self._name
            ) from None
        if isinstance(completion, dict) and completion.get("error") is not None:
            raise StreamErrorChunk(None, error_message(json.dumps(completion)))
        events = ChunkAssembler(self._name, self._on_malformed)
        for event in [*events.feed_completion(completion), *events.finish()]:
            yield event

    def _cut_off(self, decoder: SSEDecoder, content_type: str) -> _Failure:
        """The body ended before the server said it was done: dropped, or not a stream."""
        if decoder.sse_lines == 0 and decoder.foreign_line is not None:
            raise ProviderProtocolError(
                f"it answered {content_type or 'an untyped body'} starting with "
                f"{self._excerpt(decoder.foreign_line)!r} instead of an event stream",
                provider=self._name,
            )
        return _Failure(None, _CUT_OFF)

    def _error_chunk(self, exc: StreamErrorChunk, model: str) -> _Failure:
        """An error reported inside the stream: a 4xx code is final, anything else retryable."""
        message = self._excerpt(exc.message)
        status = exc.status
        if status is not None and 400 <= status < 500 and status not in RETRYABLE_STATUSES:
            raise ProviderHTTPError(
                status, message, self._name, api_key_env=self._api_key_env, model=model
            ) from None
        return _Failure(status, f"the server reported an error: {message}")

    def _on_malformed(self, payload: str) -> None:
        _log.warning(
            "provider.malformed_chunk",
            provider=self._name,
            excerpt=self._excerpt(payload)[:_MALFORMED_EXCERPT_CHARS],
        )

    def _excerpt(self, text: str) -> str:
        """Server text made safe to show: one line, bounded, without our API key."""
        text = " ".join(text.split())
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._backoff_max_s)
        delay = min(self._backoff_max_s, self._backoff_base_s * 2.0 ** (attempt - 1))
        return delay * (0.5 + 0.5 * self._rng.random()) if self._jitter else delay


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds; an HTTP date (rare from these servers) falls back to backoff."""
    value = headers.get("Retry-After", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _describe(exc: BaseException) -> str:
    """A short description of a connection failure, in words first, type for the log."""
    kind = type(exc).__name__
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return f"{_CUT_OFF} ({kind})"
    if isinstance(exc, TimeoutError):
        return f"the server sent nothing for too long ({kind})"
    return f"{kind}: {str(exc) or 'no details'}"[:_EXCERPT_CHARS]
