"""Splitting model output at Discord's message limit."""

from __future__ import annotations

import pytest

from adapters.discord.text import MESSAGE_LIMIT, split_message


class TestSplitMessage:
    def test_short_text_is_one_part(self) -> None:
        """Text under the limit is left alone."""
        assert split_message("hello") == ["hello"]

    def test_every_part_fits(self) -> None:
        """Long prose is split into parts of at most 2,000 characters, losing no word."""
        words = [f"word{i}" for i in range(1500)]
        parts = split_message(" ".join(words))
        assert all(len(p) <= MESSAGE_LIMIT for p in parts)
        assert " ".join(parts).split() == words

    def test_prefers_paragraph_breaks(self) -> None:
        """A cut falls on a blank line when one is available."""
        text = "a" * 1500 + "\n\n" + "b" * 1000
        assert split_message(text) == ["a" * 1500, "b" * 1000]

    def test_code_block_is_closed_and_reopened(self) -> None:
        """A code block cut in two is closed and reopened with its language."""
        code = "\n".join(f"print({i})" for i in range(400))
        parts = split_message(f"intro\n```python\n{code}\n```\noutro")
        assert len(parts) > 1
        assert parts[0].endswith("\n```")
        assert parts[1].startswith("```python\n")
        assert all(p.count("```") % 2 == 0 for p in parts)
        assert all(len(p) <= MESSAGE_LIMIT for p in parts)

    def test_unbreakable_word_is_hard_cut(self) -> None:
        """A single word longer than a message is cut at the limit."""
        parts = split_message("x" * 4500)
        assert [len(p) for p in parts] == [1996, 1996, 508]

    def test_tiny_limit_refused(self) -> None:
        """A limit with no room for fences is a programming error."""
        with pytest.raises(ValueError, match="limit"):
            split_message("abc", limit=5)
