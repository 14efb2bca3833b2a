#!/usr/bin/env python3
"""Set-up wrapper: the only thing a fresh machine needs is python3.

Each command creates (or refreshes, when ``pyproject.toml`` changed) the
virtual environment in ``.venv`` and then runs inside it:

    python3 tb.py run [ARGS...]     the bot: ``python -m bot ARGS`` (without a Discord
                                    token, the playground: its page and local Discord,
                                    and the bot in a process of its own)
    python3 tb.py test [ARGS...]    ruff, the import contracts, mypy, then pytest ARGS
    python3 tb.py bench [NAME...]   the benchmark scripts in tests/benchmarks/: all,
                                    or each NAME (``agent``, ``bench_agent`` or
                                    ``bench_agent.py`` is bench_agent.py alone)

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


BENCH_DIR = ROOT / "tests" / "benchmarks"


def bench_name(script: Path) -> str:
    """``bench_agent.py`` -> ``agent``: the name ``tb.py bench`` knows it by."""
    return script.stem.removeprefix("bench_")


def select_benchmarks(names: list[str], scripts: list[Path]) -> list[Path]:
    """The scripts ``names`` select, in the order given; no names: all of them.

    A name selects exactly one script, by equality (``agent``, ``bench_agent`` or
    ``bench_agent.py``), never as a substring: ``agent`` must not also run
    ``bench_subagents``.

    Raises:
        ValueError: a name is no benchmark's; the message lists the available names.
    """
    if not names:
        return list(scripts)
    by_name = {bench_name(script): script for script in scripts}
    selected: list[Path] = []
    for name in names:
        script = by_name.get(bench_name(Path(name.removesuffix(".py") + ".py")))
        if script is None:
            raise ValueError(
                f"no benchmark named {name!r}; available: {', '.join(sorted(by_name))}"
            )
        if script not in selected:
            selected.append(script)
    return selected


def cmd_bench(args: list[str]) -> int:
    try:
        scripts = select_benchmarks(args, sorted(BENCH_DIR.glob("bench_*.py")))
    except ValueError as exc:
        print(f"tb: {exc}", file=sys.stderr)
        return 2
    ensure_venv(dev=True)
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
