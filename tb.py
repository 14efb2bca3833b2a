#!/usr/bin/env python3
"""Set-up wrapper: the only thing a fresh machine needs is python3.

Each command creates (or refreshes, when ``pyproject.toml`` changed) the
virtual environment in ``.venv`` and then runs inside it:

    python3 tb.py run [ARGS...]     the bot: ``python -m bot ARGS``
    python3 tb.py test [ARGS...]    ruff, the import contracts, mypy, then pytest ARGS
    python3 tb.py bench [NAME...]   the benchmark scripts in tests/benchmarks/

The stamp file records a hash of ``pyproject.toml`` and the extras installed,
so a second run costs nothing but the hash.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".threadbound-stamp"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"


def _wanted_stamp(extras: str) -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{digest} {extras} {sys.version_info[:2]}"


def ensure_venv(*, dev: bool) -> None:
    """Create or refresh .venv; a dev install also satisfies a plain run."""
    if not PY.exists():
        print("tb: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    current = STAMP.read_text().strip() if STAMP.exists() else ""
    if current == _wanted_stamp("dev") or (not dev and current == _wanted_stamp("run")):
        return
    extras = "dev" if dev else "run"
    target = ".[dev]" if dev else "."
    print(f"tb: installing threadbound ({extras}) into .venv", flush=True)
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True, cwd=ROOT)
    subprocess.run([*pip, "install", "-e", target], check=True, cwd=ROOT)
    STAMP.write_text(_wanted_stamp(extras) + "\n")


def _run(args: list[str]) -> int:
    return subprocess.run(args, cwd=ROOT).returncode


def cmd_run(args: list[str]) -> int:
    ensure_venv(dev=False)
    os.execv(str(PY), [str(PY), "-m", "bot", *args])  # replaces this process: signals reach the bot
    return 0  # unreachable


def cmd_test(args: list[str]) -> int:
    ensure_venv(dev=True)
    checks = [
        [str(BIN / "ruff"), "check", "."],
        [str(BIN / "ruff"), "format", "--check", "."],
        [str(BIN / "lint-imports")],
        [str(BIN / "mypy")],  # strict on core/, adapters/, bot/ ([tool.mypy] in pyproject.toml)
    ]
    for check in checks:
        if code := _run(check):
            print(f"tb: {Path(check[0]).name} failed (exit {code})", file=sys.stderr)
            return code
    return _run([str(PY), "-m", "pytest", *args])


def cmd_bench(args: list[str]) -> int:
    ensure_venv(dev=True)
    bench_dir = ROOT / "tests" / "benchmarks"
    scripts = sorted(bench_dir.glob("bench_*.py"))
    if args:
        scripts = [s for s in scripts if any(name in s.stem for name in args)]
    code = 0
    for script in scripts:
        print(f"== {script.relative_to(ROOT)}", flush=True)
        code = _run([str(PY), str(script)]) or code
    return code


COMMANDS = {"run": cmd_run, "test": cmd_test, "bench": cmd_bench}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
