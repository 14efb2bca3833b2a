"""The name the model calls an MCP tool by: ``<server>__<tool>``, within providers' rules."""

from __future__ import annotations

import hashlib
import re

import pytest

from core.mcp import model_tool_name

PROVIDER_RULE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class TestModelToolName:
    @pytest.mark.parametrize(
        ("server", "tool", "name"),
        [
            ("clock", "get_current_time", "clock__get_current_time"),
            ("my-server", "tool-name_2", "my-server__tool-name_2"),
            ("fs", "read.file", "fs__read_file"),
            ("fs", "files/list", "fs__files_list"),
            ("fs", "läs fil", "fs__l_s_fil"),
            ("fs", "🙂", "fs___"),
        ],
    )
    def test_server_and_tool_joined_with_odd_characters_replaced(
        self, server: str, tool: str, name: str
    ) -> None:
        """Every character outside [A-Za-z0-9_-] becomes an underscore."""
        assert model_tool_name(server, tool) == name

    def test_exactly_64_characters_is_kept(self) -> None:
        """A name of exactly 64 characters is not cut."""
        tool = "t" * (64 - len("srv__"))
        assert model_tool_name("srv", tool) == f"srv__{tool}"

    def test_long_name_is_cut_with_a_hash_of_the_whole(self) -> None:
        """Past 64 characters: a prefix, "_", and 8 hex of the sha256 of the full name."""
        tool = "read.a_very_long_tool_name_" + "x" * 60
        name = model_tool_name("server", tool)
        digest = hashlib.sha256(f"server__{tool}".encode()).hexdigest()[:8]
        assert len(name) == 64
        assert name == f"server__read_a_very_long_tool_name_{'x' * 20}_{digest}"
        assert PROVIDER_RULE.fullmatch(name)

    def test_long_names_stay_distinct_and_deterministic(self) -> None:
        """Two long names with the same prefix differ; one name always maps the same."""
        first = model_tool_name("server", "t" * 80 + "a")
        second = model_tool_name("server", "t" * 80 + "b")
        assert first != second
        assert first == model_tool_name("server", "t" * 80 + "a")
