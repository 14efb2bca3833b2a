"""A message's files, fetched and checked one by one: a file that fails costs only itself.

What Discord (or any channel) announces about a file, its name, type and
size, is checked first, so an unsupported or oversized file is refused
without being downloaded. A download that fails, for whatever reason (an
error answer, a timeout, an address that does not resolve), refuses that
file with the reason; the message's other files and its words go on. Such a
file is also named to the model: the person meant it to be read, so the
model should know it exists and could not be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core.attachments import (
    IMAGE_MAX_BYTES,
    NO_VISION,
    UNSUPPORTED,
    AttachmentRecord,
    AttachmentStore,
    Incoming,
    Refused,
    accept,
    kind_of,
)
from core.clock import Clock
from core.errors import ThreadboundError
from core.inbox.records import FileRef
from core.logging import get_logger

__all__ = ["FileUnavailable", "ReadFiles", "read_files", "unreadable_note"]

_log = get_logger("core.inbox")

Fetch = Callable[[FileRef], Awaitable[bytes]]


class FileUnavailable(ThreadboundError):
    """A file could not be downloaded; ``reason`` says why, in words for its sender."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"{name} could not be downloaded: {reason}")


@dataclass(frozen=True, slots=True)
class ReadFiles:
    """The files that reach the model, those refused, and those that could not be read."""

    accepted: list[AttachmentRecord]
    refused: list[Refused]
    unreadable: list[Refused]
    """Refused because the download failed (also in ``refused``): the model is told."""


async def read_files(
    files: Sequence[FileRef],
    fetch: Fetch,
    *,
    text_max_bytes: int,
    vision: bool,
    store: AttachmentStore,
    clock: Clock,
    timeout_seconds: float,
) -> ReadFiles:
    """Check, fetch and accept each file; never raises for one file's sake."""
    accepted: list[AttachmentRecord] = []
    refused: list[Refused] = []
    unreadable: list[Refused] = []
    for file in files:
        early = _refused_unread(file, text_max_bytes, vision)
        if early is not None:
            refused.append(early)
            continue
        try:
            data = await _fetch_within(fetch, file, clock, timeout_seconds)
        except FileUnavailable as exc:
            failed = Refused(file.name, f"it could not be downloaded ({exc.reason})")
        except Exception as exc:  # a fetcher's bug must not cost the message
            _log.warning("inbox.file_fetch_failed", filename=file.name, exc_info=exc)
            failed = Refused(file.name, "it could not be downloaded")
        else:
            result = accept(
                Incoming(file.name, file.content_type, data),
                text_max_bytes=text_max_bytes,
                vision=vision,
                store=store,
            )
            if isinstance(result, Refused):
                refused.append(result)
            else:
                accepted.append(result)
            continue
        _log.warning("attachment.download_failed", filename=file.name, error=failed.reason)
        refused.append(failed)
        unreadable.append(failed)
    return ReadFiles(accepted, refused, unreadable)


async def _fetch_within(fetch: Fetch, file: FileRef, clock: Clock, seconds: float) -> bytes:
    """``fetch(file)``, refused once ``seconds`` pass on ``clock`` (a test's fake clock too)."""
    download = asyncio.ensure_future(fetch(file))
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({download, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not download.done():
            download.cancel()
            await asyncio.gather(download, return_exceptions=True)
    if download.cancelled():
        raise FileUnavailable(file.name, f"no answer within {seconds:g} seconds")
    return download.result()


def _refused_unread(file: FileRef, text_max: int, vision: bool) -> Refused | None:
    """A refusal decided from what the channel announces, so the file is not downloaded."""
    kind = kind_of(file.name, file.content_type)
    if kind is None:
        return Refused(file.name, UNSUPPORTED)
    if kind == "image" and not vision:
        return Refused(file.name, NO_VISION)
    limit = IMAGE_MAX_BYTES if kind == "image" else text_max
    if file.size > limit:
        what = "images" if kind == "image" else "text files"
        return Refused(file.name, f"{what} may be {limit:,} bytes at most")
    return None


def unreadable_note(unreadable: Sequence[Refused]) -> str:
    """The lines the model reads about files it was sent but could not be given."""
    return "\n".join(
        f"[The attached file “{r.name}” could not be read: {r.reason}.]" for r in unreadable
    )
