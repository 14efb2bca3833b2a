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
from core.bindings.service import LifecycleDefaults, SessionBindingService

__all__ = [
    "AdapterRegistry",
    "BindingStatus",
    "BindingTargetKind",
    "ChannelAdapter",
    "ConversationKey",
    "ConversationRef",
    "ExpiryReason",
    "LifecycleDefaults",
    "SessionBindingRecord",
    "SessionBindingService",
    "expiry_reason",
    "run_maintenance",
    "sweep",
]
