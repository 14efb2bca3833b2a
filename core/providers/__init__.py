"""Model providers: the ``Provider`` port, an OpenAI-compatible client and a scripted fake.

The agent loop depends only on :class:`Provider` and the message and event types;
which endpoint answers is decided once, at wiring time, from ``[providers.<name>]``.
"""

from __future__ import annotations

from core.config import ProviderConfig
from core.errors import (
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderUnavailable,
)
from core.providers.config import build_provider
from core.providers.openai_compat import RETRYABLE_STATUSES, OpenAICompatibleProvider
from core.providers.scripted import ScriptedProvider, Step, split_text
from core.providers.types import (
    ChatMessage,
    Provider,
    ProviderEvent,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    Usage,
)

__all__ = [
    "RETRYABLE_STATUSES",
    "ChatMessage",
    "OpenAICompatibleProvider",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderEvent",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderUnavailable",
    "ScriptedProvider",
    "Step",
    "StreamDone",
    "TextDelta",
    "ToolCall",
    "ToolCallReady",
    "ToolSpec",
    "Usage",
    "build_provider",
    "split_text",
]
