"""Splitting never cuts inside what a reader sees as one character (a grapheme cluster).

Property-style: seeded random texts built from awkward clusters (ZWJ families,
flags, skin tones, keycaps, stacked accents, tag sequences) are split with
several limits; every case must rejoin to the original, fit the limit, and
start each part on a cluster boundary of the original.
"""

from __future__ import annotations

import random
import unicodedata
from itertools import accumulate

import pytest
import regex

from adapters.discord.text import MESSAGE_LIMIT, split_message

FAMILY = "👨\u200d👩\u200d👧\u200d👦"
FLAGS = "🇫🇷🇩🇪🇯🇵"
THUMB = "👍🏽"
KEYCAP = "1\ufe0f\u20e3"
ACCENTED = "e\u0301\u0302"
ENGLAND = "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
CLUSTERS = [FAMILY, "🇫🇷", "🇩🇪", THUMB, KEYCAP, ACCENTED, ENGLAND, "x", "é", "漢"]

ZWJ = "\u200d"
REGIONAL = range(0x1F1E6, 0x1F200)
MODIFIERS = range(0x1F3FB, 0x1F400)
TAGS = range(0xE0020, 0xE0080)


def boundaries(text: str) -> set[int]:
    """Every offset of ``text`` between two of its grapheme clusters."""
    return {0, *accumulate(len(m.group()) for m in regex.finditer(r"\X", text))}


def starts_mid_cluster(part: str) -> bool:
    """The part opens with what only continues a cluster (or half a flag)."""
    first = part[0]
    if first == ZWJ or first == "\ufe0f" or ord(first) in MODIFIERS or ord(first) in TAGS:
        return True
    if unicodedata.category(first) in ("Mn", "Mc", "Me"):
        return True
    flags = len(part) - len(part.lstrip("".join(map(chr, REGIONAL))))
    return flags % 2 == 1


def check(text: str, limit: int) -> list[str]:
    parts = split_message(text, limit)
    assert "".join(parts) == text
    assert all(len(part) <= limit for part in parts)
    cuts = set(accumulate(len(part) for part in parts))
    assert cuts <= boundaries(text), sorted(cuts - boundaries(text))
    assert not [part for part in parts if starts_mid_cluster(part)]
    return parts


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("offset", range(8))
def test_a_run_of_one_cluster_is_cut_between_clusters(cluster: str, offset: int) -> None:
    """No space for 2,000 characters: the hard cut moves back to the last whole cluster."""
    text = "a" * offset + cluster * (2 * MESSAGE_LIMIT // len(cluster) + 3)
    assert len(check(text, MESSAGE_LIMIT)) >= 2


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_of_mixed_clusters(seed: int) -> None:
    """Mixed clusters, with or without spaces, at small and real limits."""
    rng = random.Random(seed)
    pool = [*CLUSTERS, " "] if seed % 2 else CLUSTERS
    text = "".join(rng.choice(pool) for _ in range(rng.randrange(50, 1500)))
    for limit in (20, 23, 37, 64, 101, MESSAGE_LIMIT):
        check(text, limit)


def test_a_space_carrying_an_accent_is_not_a_place_to_cut() -> None:
    """A combining mark after a space belongs to the space: cut before the pair, not in it."""
    text = "a" * 15 + " \u0301" + "b" * 30
    parts = check(text, 20)
    assert parts[0] == "a" * 15


def test_a_single_cluster_longer_than_a_message_is_still_cut() -> None:
    """Zalgo text (one cluster of 3,000 marks) cannot fit whole: it is cut, nothing lost."""
    text = "z" + "\u0301" * 3000
    parts = split_message(text)
    assert "".join(parts) == text
    assert all(len(part) <= MESSAGE_LIMIT for part in parts)


def test_plain_text_splits_as_before() -> None:
    """ASCII: the same parts as the code-point cut always made."""
    assert [len(p) for p in split_message("x" * 4500)] == [1996, 1996, 508]
    words = " ".join(f"w{i}" for i in range(2000))
    assert all(part.endswith(" ") for part in split_message(words)[:-1])
