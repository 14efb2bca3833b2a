"""Session bindings: which agent session speaks in which conversation."""

from __future__ import annotations

from core.bindings.adapter import AdapterRegistry, ChannelAdapter
from core.bindings.lifecycle import expiry_reason, run_maintenance, sweep
from core.bindings.records import (
    BindingStatus,
    BindingTargetKind,
    ConversationKey,
    ConversationRef,
    ExpiryReason,
    SessionBindingRecord,
)
from core.bindings.service import NO_EXPIRY, BindingWindows, SessionBindingService

__all__ = [
    "NO_EXPIRY",
    "AdapterRegistry",
    "BindingStatus",
    "BindingTargetKind",
    "BindingWindows",
    "ChannelAdapter",
    "ConversationKey",
    "ConversationRef",
    "ExpiryReason",
    "SessionBindingRecord",
    "SessionBindingService",
    "expiry_reason",
    "run_maintenance",
    "sweep",
]
