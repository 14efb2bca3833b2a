"""structlog configuration: JSON lines for machines, a readable console for people.

One pipeline serves both structlog loggers and stdlib loggers (``discord``,
``discord.http``, ``aiohttp``): structlog events go through the shared processor
chain and are handed to stdlib logging with
:func:`structlog.stdlib.ProcessorFormatter.wrap_for_formatter`; foreign stdlib
records run the same chain as ``foreign_pre_chain`` inside each handler's
:class:`~structlog.stdlib.ProcessorFormatter`. So every line in the JSON file has
the same envelope and, above all, passes the same :class:`RedactSecrets`.
(Redaction itself lives in :mod:`core._redaction`, the secret key names in
:mod:`core.secret_keys`; their names are re-exported here.)

The envelope of every JSON line::

    {"event": "routing.resolved", "level": "info", "logger": "threadbound.routing",
     "timestamp": "2026-01-01T12:00:00.123456Z", ...fields, ...bound context}

``timestamp`` is ISO-8601 in UTC, always with microseconds and a ``Z`` suffix
(:data:`TIMESTAMP_FORMAT`); :mod:`core.canary` parses it with ``fromisoformat``.

Order matters in the chain: exceptions are formatted to text *before* redaction
so a secret inside a traceback is redacted like any other string.

Turning logging off (benchmarks): ``configure_logging(enabled=False)`` installs
no handlers, makes every structlog level a no-op method and raises the stdlib
root level above ``CRITICAL``.

Levels are fixed per configuration: loggers come from
:func:`structlog.make_filtering_bound_logger`, whose disabled methods are a bare
``return None``, and are cached on first use. Loggers handed out by
:func:`get_logger` are reset when :func:`configure_logging` runs again; a
logger you already ``bind()``-ed keeps the level it was created with.

:func:`write_event` is the structured events' own door into the same chain: it hands
the processors the dict the event built, where ``logger.info(name, **fields)`` would
copy it three times on the way (``docs/log-events.md``, "Cost of an event line").
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO, cast

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

from core._redaction import MIN_SECRET_LENGTH as MIN_SECRET_LENGTH
from core._redaction import (
    REDACTED,
    RedactSecrets,
    forget_secrets,
    redact_text,
    register_secret,
)
from core.secret_keys import is_secret_key

__all__ = [
    "REDACTED",
    "TIMESTAMP_FORMAT",
    "TIMESTAMP_KEY",
    "RedactSecrets",
    "bind_context",
    "configure_logging",
    "get_logger",
    "is_enabled",
    "is_secret_key",
    "redact_text",
    "register_secret",
    "reset_logging",
    "shutdown_logging",
    "write_event",
]

TIMESTAMP_KEY: Final = "timestamp"
TIMESTAMP_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
"""ISO-8601 UTC, always with microseconds, so timestamps also sort as text."""

DEFAULT_LOGGER_NAME: Final = "threadbound"

# ---------------------------------------------------------------------------
# Configuration.

_REDACT: Final = RedactSecrets()
_TIMESTAMPER: Final = structlog.processors.TimeStamper(
    fmt=TIMESTAMP_FORMAT, utc=True, key=TIMESTAMP_KEY
)
_ENVELOPE: Final[list[Processor]] = [
    structlog.contextvars.merge_contextvars,
    structlog.processors.add_log_level,
    structlog.stdlib.add_logger_name,
]


def _record_timestamp(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Stamp a stdlib record with its creation time, so every handler writes the same one."""
    record = event_dict.get("_record")
    if record is None:
        return _TIMESTAMPER(logger, method_name, event_dict)
    event_dict[TIMESTAMP_KEY] = datetime.fromtimestamp(record.created, UTC).strftime(
        TIMESTAMP_FORMAT
    )
    return event_dict


_FOREIGN_PRE_CHAIN: Final[list[Processor]] = [
    *_ENVELOPE,
    _record_timestamp,
    structlog.processors.format_exc_info,
    _REDACT,
]
_CHAIN: Final[tuple[Processor, ...]] = (
    *_ENVELOPE,
    _TIMESTAMPER,
    structlog.processors.StackInfoRenderer(),
    structlog.processors.format_exc_info,
    _REDACT,
    structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
)
# One list object for the whole process, refilled rather than replaced: loggers
# cached on first use and capture_logs() both hold a reference to it.
_PROCESSORS: Final[list[Processor]] = list(_CHAIN)

_installed: list[logging.Handler] = []
_handed_out: weakref.WeakSet[Any] = weakref.WeakSet()
_saved_root_level: int | None = None


def _level_number(level: str) -> int:
    number = logging.getLevelNamesMapping().get(level.strip().upper())
    if number is None or level.strip().upper() == "NOTSET":
        raise ValueError(
            f"unknown log level {level!r}; use debug, info, warning, error or critical "
            "(or configure_logging(enabled=False) to turn logging off)"
        )
    return number


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _formatter(renderer: Processor) -> logging.Formatter:
    return structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        foreign_pre_chain=_FOREIGN_PRE_CHAIN,
    )


def _remove_handlers() -> None:
    root = logging.getLogger()
    while _installed:
        handler = _installed.pop()
        root.removeHandler(handler)
        try:
            handler.flush()
        finally:
            handler.close()


def _reset_cached_loggers() -> None:
    # BoundLoggerLazyProxy caches by shadowing its ``bind`` method with an
    # instance attribute; dropping it makes the proxy read the new config.
    for proxy in list(_handed_out):
        proxy.__dict__.pop("bind", None)


def configure_logging(
    *,
    level: str = "info",
    json_path: Path | None = None,
    console: bool = True,
    console_stream: TextIO | None = None,
    secrets: Iterable[str] = (),
    enabled: bool = True,
) -> None:
    """Configure structlog and stdlib logging; safe to call again (it replaces itself).

    Args:
        level: minimum level for structlog and the stdlib root logger.
        json_path: write one JSON object per line (UTF-8) here; parent dirs are
            created; the file is appended to. ``None``: no JSON file.
        console: also render readable lines to ``console_stream`` (default
            stderr); colours only when the stream is a tty.
        secrets: exact strings to redact everywhere (see :func:`register_secret`).
        enabled: ``False`` turns logging off entirely (no handlers, every level
            a no-op) for benchmarks.

    Raises:
        ValueError: ``level`` is not a known level name.
    """
    global _saved_root_level
    number = _level_number(level)
    for secret in secrets:
        register_secret(secret)

    _remove_handlers()
    root = logging.getLogger()
    if _saved_root_level is None:
        _saved_root_level = root.level

    handlers: list[logging.Handler] = []
    if not enabled:
        handlers.append(logging.NullHandler())
    else:
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            file_handler = logging.FileHandler(json_path, mode="a", encoding="utf-8")
            file_handler.setFormatter(
                _formatter(structlog.processors.JSONRenderer(ensure_ascii=False))
            )
            handlers.append(file_handler)
        if console:
            stream = console_stream if console_stream is not None else sys.stderr
            console_handler = logging.StreamHandler(stream)
            console_handler.setFormatter(
                _formatter(structlog.dev.ConsoleRenderer(colors=_is_tty(stream)))
            )
            handlers.append(console_handler)
    for handler in handlers:
        root.addHandler(handler)
        _installed.append(handler)
    root.setLevel(number if enabled else logging.CRITICAL + 1)
    _set_min_level(number if enabled else logging.CRITICAL + 1)

    _PROCESSORS[:] = _CHAIN
    structlog.configure(
        processors=_PROCESSORS,
        wrapper_class=structlog.make_filtering_bound_logger(
            number if enabled else logging.CRITICAL
        ),
        logger_factory=structlog.stdlib.LoggerFactory(),
        context_class=dict,
        cache_logger_on_first_use=True,
    )
    _reset_cached_loggers()


def shutdown_logging() -> None:
    """Flush and close the handlers :func:`configure_logging` installed (at bot exit)."""
    _remove_handlers()


def reset_logging() -> None:
    """Undo :func:`configure_logging`: close its handlers, restore structlog's defaults.

    Tests call this in teardown so one test's level or file never leaks into
    the next one's ``capture_logs()``. Registered secrets are forgotten too.
    """
    global _saved_root_level
    _remove_handlers()
    if _saved_root_level is not None:
        logging.getLogger().setLevel(_saved_root_level)
        _saved_root_level = None
    structlog.reset_defaults()
    _set_min_level(logging.NOTSET)
    # Loggers structlog cached while configured keep our list: give it the defaults.
    _PROCESSORS[:] = structlog.get_config()["processors"]
    structlog.configure(processors=_PROCESSORS)
    forget_secrets()
    _reset_cached_loggers()


_min_level = logging.NOTSET


def _set_min_level(level: int) -> None:
    global _min_level
    _min_level = level


def is_enabled(level: int = logging.INFO) -> bool:
    """Whether a line at ``level`` would be written: one comparison, for hot paths.

    A hot path checks this before building an event's fields, so a resolution
    with logging off costs nothing for the log line it does not write.
    """
    return level >= _min_level


def get_logger(name: str | None = None) -> FilteringBoundLogger:
    """A structlog logger named ``name`` (default ``"threadbound"``).

    Cheap to keep at module level: it is built on first use, cached, and reset
    when logging is reconfigured.
    """
    proxy = structlog.get_logger(name or DEFAULT_LOGGER_NAME)
    _handed_out.add(proxy)
    return cast(FilteringBoundLogger, proxy)


_LEVEL_NUMBERS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def write_event(logger: object, level: str, event: str, fields: dict[str, Any]) -> None:
    """Write one line, as ``getattr(logger, level)(event, **fields)`` would, with less copying.

    A logged router decision costs its resolution plus one such line, and most of
    the line is the shared chain and the handler; what is left to save is the
    way in. A structlog method passes ``**fields`` on twice and then copies it
    into the bound context (three copies of a dozen keys: several percent of the
    line), so this takes ``fields`` as the event dict itself: the caller gives it
    away. The level, the bound context (``fields`` win over it), the
    processors and the wrapped logger are the bound logger's own, so the line
    is the same one, and :func:`structlog.testing.capture_logs` sees it.

    Args:
        logger: a logger from :func:`get_logger` or one ``bind()``-ed from it; any
            other object with level methods is simply called.
        level: ``"info"``, ``"warning"`` or ``"error"``.
        event: the event name.
        fields: the fields; consumed (it becomes the line's event dict).
    """
    bound = logger
    if not isinstance(bound, structlog.BoundLoggerBase):
        # A lazy proxy hands out the bound logger it cached on first use.
        bind = getattr(logger, "bind", None)
        bound = bind() if bind is not None else None
    is_enabled_for = getattr(bound, "is_enabled_for", None)
    if not isinstance(bound, structlog.BoundLoggerBase) or is_enabled_for is None:
        getattr(logger, level)(event, **fields)  # not a filtering structlog logger
        return
    if not is_enabled_for(_LEVEL_NUMBERS[level]):
        return
    # structlog's BoundLoggerBase._process_event and _proxy_to_logger, minus the copies.
    context = bound._context
    event_dict: Any = {**context, **fields} if context else fields
    event_dict["event"] = event
    wrapped = bound._logger
    try:
        for processor in bound._processors:
            event_dict = processor(wrapped, level, event_dict)
        if isinstance(event_dict, str | bytes | bytearray):
            getattr(wrapped, level)(event_dict)
        elif isinstance(event_dict, tuple):
            args, kw = event_dict
            getattr(wrapped, level)(*args, **kw)
        elif isinstance(event_dict, dict):
            getattr(wrapped, level)(**event_dict)
        else:
            raise ValueError(
                "Last processor didn't return an appropriate value.  "
                "Valid return values are a dict, a tuple of (args, kwargs), bytes, or a str."
            )
    except structlog.DropEvent:
        return


@contextmanager
def bind_context(
    *,
    session_key: str | None = None,
    binding_id: str | None = None,
    account: str | None = None,
    guild: str | None = None,
    **fields: Any,
) -> Iterator[None]:
    """Bind context fields for every log line in this block, across awaits.

    The named keys are the ones actors bind; the canary groups by ``account`` and ``guild``.

    Wraps :func:`structlog.contextvars.bound_contextvars`, so nested blocks
    and concurrent tasks each see their own values and leaving the block
    restores the previous ones. ``None`` values are not bound (an outer value
    stays visible); fields an event passes explicitly win over context.
    """
    known = {
        "session_key": session_key,
        "binding_id": binding_id,
        "account": account,
        "guild": guild,
    }
    values = {k: v for k, v in {**known, **fields}.items() if v is not None}
    with structlog.contextvars.bound_contextvars(**values):
        yield
