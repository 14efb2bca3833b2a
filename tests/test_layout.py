"""The layering rule: core/ is channel-agnostic and never imports discord or mautrix."""

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


CHAT_SDKS = ("discord", "mautrix")
"""The chat platforms' client libraries: adapters/ and bot/ may use them, core/ never."""


class TestCoreIsChannelAgnostic:
    def test_no_source_file_imports_a_chat_sdk(self) -> None:
        """No module under core/ names discord or mautrix in an import, even inside a function."""
        offenders = {
            str(path.relative_to(ROOT)): sorted(
                m for m in _imported_modules(path) if m.split(".")[0] in CHAT_SDKS
            )
            for path in (ROOT / "core").rglob("*.py")
        }
        assert {k: v for k, v in offenders.items() if v} == {}

    def test_importing_all_of_core_loads_no_chat_sdk(self) -> None:
        """Importing every core module in a fresh interpreter loads neither discord nor mautrix."""
        modules = [m.name for m in pkgutil.walk_packages(core.__path__, "core.")]
        code = (
            "import importlib, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {CHAT_SDKS!r}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )
        assert len(modules) > 10
        assert out.stdout.strip() == "[]"
