"""tb.py, the set-up wrapper: which benchmark scripts ``tb.py bench NAME`` runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_tb() -> ModuleType:
    """tb.py by path: it is a script at the root, not part of a package."""
    spec = importlib.util.spec_from_file_location("tb", ROOT / "tb.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("tb", module)
    spec.loader.exec_module(module)
    return module


tb = load_tb()
SCRIPTS = [Path(f"/bench/bench_{name}.py") for name in ("acp", "agent", "subagents", "mcp")]


class TestSelectBenchmarks:
    @pytest.mark.parametrize("name", ["agent", "bench_agent", "bench_agent.py"])
    def test_a_name_selects_exactly_one_script(self, name: str) -> None:
        """'agent' is bench_agent.py alone, not bench_subagents.py too (issue 26)."""
        assert tb.select_benchmarks([name], SCRIPTS) == [Path("/bench/bench_agent.py")]

    def test_no_name_selects_all(self) -> None:
        assert tb.select_benchmarks([], SCRIPTS) == SCRIPTS

    def test_names_keep_their_order_once_each(self) -> None:
        selected = tb.select_benchmarks(["mcp", "acp", "bench_mcp"], SCRIPTS)
        assert selected == [Path("/bench/bench_mcp.py"), Path("/bench/bench_acp.py")]

    @pytest.mark.parametrize("name", ["gent", "bench_", "", "agents"])
    def test_unknown_name_lists_the_available_ones(self, name: str) -> None:
        with pytest.raises(ValueError, match=r"available: acp, agent, mcp, subagents$"):
            tb.select_benchmarks([name], SCRIPTS)

    def test_every_script_in_the_tree_has_a_distinct_name(self) -> None:
        """The real directory: each script is reachable by its own name."""
        scripts = sorted(tb.BENCH_DIR.glob("bench_*.py"))
        assert scripts
        for script in scripts:
            assert tb.select_benchmarks([tb.bench_name(script)], scripts) == [script]

    def test_bench_command_refuses_an_unknown_name(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Before any set-up: exit status 2 and the list of names on stderr."""
        assert tb.cmd_bench(["no-such-benchmark"]) == 2
        error = capsys.readouterr().err
        assert "no benchmark named 'no-such-benchmark'" in error
        assert "agent" in error
        assert "foundation" in error
