"""Which attached files reach the model, how, and what the log keeps of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.attachments import (
    IMAGE_MAX_BYTES,
    AttachmentRecord,
    AttachmentStore,
    Incoming,
    Refused,
    accept,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture
def store(tmp_path: Path) -> AttachmentStore:
    return AttachmentStore(tmp_path / "attachments")


def take(store: AttachmentStore, name: str, mime: str | None, data: bytes, **kw: object):
    options = {"text_max_bytes": 200_000, "vision": True, **kw}
    return accept(Incoming(name, mime, data), store=store, **options)  # type: ignore[arg-type]


def test_a_text_file_is_kept_by_content(store: AttachmentStore) -> None:
    record = take(store, "notes.md", None, b"# Plan\nship it")
    assert isinstance(record, AttachmentRecord)
    assert (record.kind, record.text, record.size) == ("text", "# Plan\nship it", 14)
    assert record.stored is None
    assert not store.root.exists()  # text is in the log, nothing on disk


def test_an_image_is_stored_once_by_its_hash(store: AttachmentStore) -> None:
    first = take(store, "a.png", "image/png", PNG)
    second = take(store, "b.png", "image/png", PNG)
    assert isinstance(first, AttachmentRecord)
    assert isinstance(second, AttachmentRecord)
    assert first.stored == second.stored == f"{first.sha256}.png"
    assert store.load(first.stored) == PNG
    assert len(list(store.root.iterdir())) == 1


@pytest.mark.parametrize(
    ("name", "mime", "data", "options", "reason"),
    [
        ("x.zip", "application/zip", b"PK", {}, "only text files (UTF-8) and images"),
        ("a.png", "image/png", PNG, {"vision": False}, "does not read images"),
        ("big.txt", "text/plain", b"x" * 11, {"text_max_bytes": 10}, "text files may be"),
        ("big.png", "image/png", b"x" * (IMAGE_MAX_BYTES + 1), {}, "images may be 5 MB"),
        ("latin1.txt", "text/plain", "café".encode("latin-1"), {}, "not UTF-8"),
    ],
)
def test_refusals_say_why(
    store: AttachmentStore, name: str, mime: str, data: bytes, options: dict, reason: str
) -> None:
    refused = take(store, name, mime, data, **options)
    assert isinstance(refused, Refused)
    assert reason in refused.reason
    assert not store.root.exists()


def test_only_stored_names_can_be_loaded(store: AttachmentStore) -> None:
    with pytest.raises(ValueError, match="not a stored attachment"):
        store.load("../../etc/passwd")
