"""Tests for core.errors: what an error message shows of the value it refused."""

from __future__ import annotations

import pytest

from core.errors import got


class TestGot:
    @pytest.mark.parametrize(
        ("value", "shown"),
        [
            ("verbose", "got 'verbose'"),
            ("gpt-4o-mini", "got 'gpt-4o-mini'"),
            (-1, "got -1"),
            (
                "sk-proj-4f9a8b7c6d5e",
                "got a value of 20 characters, not shown in case it is a secret",
            ),
            ("x" * 25, "got a value of 25 characters, not shown in case it is a secret"),
            ("a\u200bb", "got a value of 3 characters, not shown in case it is a secret"),
        ],
    )
    def test_what_an_error_echoes(self, value: object, shown: str):
        """Short words and numbers are echoed; credential-like text is not."""
        assert got(value) == shown
