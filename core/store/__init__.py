"""The durable store: SQLite by default, PostgreSQL by URL, one versioned schema."""

from __future__ import annotations

from core.store.database import Database, open_database
from core.store.engine import create_engine, redacted_url
from core.store.errors import store_errors
from core.store.migrations import SCHEMA_VERSION, current_version, migrate
from core.store.transaction import Returned, Transaction

__all__ = [
    "SCHEMA_VERSION",
    "Database",
    "Returned",
    "Transaction",
    "create_engine",
    "current_version",
    "migrate",
    "open_database",
    "redacted_url",
    "store_errors",
]
