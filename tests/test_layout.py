"""The layering rule: core/ is channel-agnostic and never imports discord."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import core
from tests.fixtures.source import parse

ROOT = Path(__file__).resolve().parent.parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


class TestCoreIsChannelAgnostic:
    def test_no_source_file_imports_discord(self) -> None:
        """No module under core/ names discord in an import, even inside a function."""
        offenders = {
            str(path.relative_to(ROOT)): sorted(
                m for m in _imported_modules(path) if m.split(".")[0] == "discord"
            )
            for path in (ROOT / "core").rglob("*.py")
        }
        assert {k: v for k, v in offenders.items() if v} == {}

    def test_importing_all_of_core_loads_no_discord(self) -> None:
        """Importing every core module in a fresh interpreter leaves discord unloaded."""
        modules = [m.name for m in pkgutil.walk_packages(core.__path__, "core.")]
        code = (
            "import importlib, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'discord'))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )
        assert len(modules) > 10
        assert out.stdout.strip() == "[]"
