"""Loading the config imports no provider and no HTTP client.

``core.config`` is read by every entry point, the playground and tools that only
validate a file; if it pulled in ``aiohttp`` (through the provider that a
``[providers.<name>]`` table describes) each of them would pay for it and the
config package could again import its own importers. A fresh interpreter is the
only honest check, since this test process has long imported both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from core import logging as core_logging
from core.config import loading

ROOT = Path(__file__).resolve().parents[3]
NOT_LOADED = ("aiohttp", "core.providers", "core.providers.openai_compat")


def test_importing_core_config_leaves_providers_and_aiohttp_out() -> None:
    """``import core.config`` in a new interpreter loads neither aiohttp nor a provider."""
    script = (
        "import json, sys\n"
        "import core.config\n"
        f"print(json.dumps([name for name in {NOT_LOADED!r} if name in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(result.stdout) == []


def test_the_loader_and_the_log_redactor_share_one_secret_key_test() -> None:
    """A key the config file may not hold is exactly a key whose value no log line shows."""
    assert loading.is_secret_key is core_logging.is_secret_key
    for key in ("authorization", "webhook_url", "passphrase", "private_key", "apiKey"):
        assert core_logging.is_secret_key(key), key
    for key in ("token_env", "max_tokens", "token_count", "api_key_env"):
        assert not core_logging.is_secret_key(key), key
