"""Files people attach to a message in a bound conversation: what may reach the model.

Text files (UTF-8, up to ``[agent] attachment_text_max_bytes`` each, 200 KB by
default) reach the model as text, under their file name. Images (PNG, JPEG,
WebP, GIF, up to 5 MB) reach it as image parts, for a model marked
``vision = true``; for any other model they are refused. Anything else, or
anything too large, is refused with a specific reason, and the rest of the
message still goes through.

What reached the model is recorded in the session log: a text file by its
content; an image by a **stored copy** under the attachments directory
(``[store] attachments_dir``), named by its SHA-256, with that hash and its size.
A copy rather than the chat service's URL because those URLs expire (Discord's
are signed for about a day) while the session, and every later model call that
reads its history, needs the picture again; and by hash, so the same picture
sent twice is stored once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "IMAGE_MAX_BYTES",
    "IMAGE_TYPES",
    "NO_VISION",
    "UNSUPPORTED",
    "AttachmentRecord",
    "AttachmentStore",
    "Incoming",
    "Refused",
    "accept",
    "kind_of",
    "refusal_text",
]

IMAGE_MAX_BYTES: Final = 5 * 1024 * 1024
UNSUPPORTED: Final = "only text files (UTF-8) and images (PNG, JPEG, WebP, GIF) can be read"
NO_VISION: Final = "this session's model does not read images (no vision = true on its provider)"
IMAGE_TYPES: Final = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
}
TEXT_SUFFIXES: Final = frozenset(
    (
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".log",
        ".py",
        ".js",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".kt",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".sh",
        ".bash",
        ".sql",
        ".html",
        ".htm",
        ".css",
        ".xml",
        ".svg",
        ".tex",
        ".diff",
        ".patch",
    )
)


class AttachmentRecord(BaseModel):
    """One attachment as the log keeps it (and the model reads it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["text", "image"]
    mime: str
    size: int
    sha256: str
    text: str | None = None
    """A text file's content."""
    stored: str | None = None
    """An image's copy, relative to the attachments directory."""


@dataclass(frozen=True, slots=True)
class Incoming:
    """A file as the channel gives it, read into memory."""

    name: str
    content_type: str | None
    data: bytes


@dataclass(frozen=True, slots=True)
class Refused:
    name: str
    reason: str


def _kind(incoming: Incoming) -> Literal["text", "image"] | None:
    mime = (incoming.content_type or "").split(";")[0].strip().lower()
    if mime in IMAGE_TYPES:
        return "image"
    if mime.startswith("text/") or Path(incoming.name).suffix.lower() in TEXT_SUFFIXES:
        return "text"
    if mime in ("application/json", "application/xml", "application/x-yaml"):
        return "text"
    return None


def kind_of(name: str, content_type: str | None) -> Literal["text", "image"] | None:
    """What a file would be taken as, before reading it (so an unsupported one is not fetched)."""
    return _kind(Incoming(name, content_type, b""))


def accept(
    incoming: Incoming, *, text_max_bytes: int, vision: bool, store: AttachmentStore
) -> AttachmentRecord | Refused:
    """The record of an accepted file (an image is stored), or why it is refused."""
    kind = _kind(incoming)
    size = len(incoming.data)
    digest = hashlib.sha256(incoming.data).hexdigest()
    if kind is None:
        return Refused(incoming.name, UNSUPPORTED)
    if kind == "image":
        mime = (incoming.content_type or "").split(";")[0].strip().lower()
        if not vision:
            return Refused(incoming.name, NO_VISION)
        if size > IMAGE_MAX_BYTES:
            return Refused(incoming.name, f"images may be {_size(IMAGE_MAX_BYTES)} at most")
        stored = store.save(incoming.data, digest, IMAGE_TYPES[mime])
        return AttachmentRecord(
            name=incoming.name, kind="image", mime=mime, size=size, sha256=digest, stored=stored
        )
    if size > text_max_bytes:
        return Refused(incoming.name, f"text files may be {_size(text_max_bytes)} at most")
    try:
        text = incoming.data.decode("utf-8")
    except UnicodeDecodeError:
        return Refused(incoming.name, "it is not UTF-8 text")
    mime = (incoming.content_type or "text/plain").split(";")[0].strip().lower()
    return AttachmentRecord(
        name=incoming.name, kind="text", mime=mime, size=size, sha256=digest, text=text
    )


def refusal_text(refused: list[Refused]) -> str:
    """One reply listing what did not reach the model, and why."""
    lines = [f"- `{r.name[:80]}`: {r.reason}" for r in refused]
    return "These attachments did not reach the model:\n" + "\n".join(lines)


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:g} MB" if count >= 1024 * 1024 else f"{count // 1024} KB"


class AttachmentStore:
    """Stored copies of images, named by content hash under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, data: bytes, digest: str, extension: str) -> str:
        name = f"{digest}.{extension}"
        path = self.root / name
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(path.suffix + ".part")
            partial.write_bytes(data)
            partial.replace(path)  # whole or not at all
        return name

    def load(self, stored: str) -> bytes:
        path = (self.root / stored).resolve()
        if path.parent != self.root.resolve():
            raise ValueError(f"{stored!r} is not a stored attachment")
        return path.read_bytes()
