"""Wiring: config -> store -> services, built once and passed down.

No globals: everything the bot needs hangs off :class:`Services`, which the
entry point builds before connecting and closes after disconnecting.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.bindings.adapter import AdapterRegistry
from core.bindings.records import ConversationRef
from core.bindings.service import LifecycleDefaults, SessionBindingService
from core.clock import Clock, SystemClock
from core.config import Config, resolve_thread_bindings
from core.routing import BoundDeliveryRouter
from core.store import Database, open_database

__all__ = ["Services", "build_services", "lifecycle_defaults_for"]


@dataclass(slots=True)
class Services:
    config: Config
    database: Database
    adapters: AdapterRegistry
    bindings: SessionBindingService
    router: BoundDeliveryRouter

    async def close(self) -> None:
        """Flush pending activity, then close the store: nothing is left half-written."""
        try:
            await self.bindings.close()
        finally:
            await self.database.close()


def lifecycle_defaults_for(config: Config) -> LifecycleDefaults:
    """Idle timeout and max age of a new binding, from the flags of its account."""
    known = set(config.account_ids())

    def defaults(conversation: ConversationRef) -> tuple[int, int]:
        account = conversation.account_id if conversation.account_id in known else None
        settings = resolve_thread_bindings(config, channel=conversation.channel, account_id=account)
        return settings.idle_timeout_ms, settings.max_age_ms

    return defaults


async def build_services(config: Config, *, clock: Clock | None = None) -> Services:
    """Open the store (migrating it) and build the services over it, indexes loaded."""
    clock = clock or SystemClock()
    database = await open_database(config.store_url(), busy_timeout_ms=config.store.busy_timeout_ms)
    adapters = AdapterRegistry()
    bindings = SessionBindingService(
        database,
        adapters=adapters,
        clock=clock,
        lifecycle_defaults=lifecycle_defaults_for(config),
    )
    try:
        await bindings.start()
    except BaseException:
        await database.close()
        raise
    router = BoundDeliveryRouter(bindings, clock=clock)
    return Services(config, database, adapters, bindings, router)
