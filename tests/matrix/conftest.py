"""The ``synapse`` fixture: one real homeserver for the Matrix tests of a session.

It skips, printing why, when Synapse cannot start, unless
``THREADBOUND_REQUIRE_SYNAPSE=1`` (set by ``.ci/run``), which makes that a failure so
CI can never pass without having run them. A failing test that used it gets the end
of the homeserver's log in its report; the whole log stays in pytest's temp directory.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator

import pytest

from tests.matrix.synapse import Synapse, SynapseUnavailable, running_synapse

REQUIRE_SYNAPSE = os.environ.get("THREADBOUND_REQUIRE_SYNAPSE") == "1"


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """A running Synapse with the bot, an owner and someone else registered."""
    try:
        with running_synapse(tmp_path_factory.mktemp("synapse")) as server:
            yield server
    except SynapseUnavailable as exc:
        if REQUIRE_SYNAPSE:
            pytest.fail(f"{exc}; THREADBOUND_REQUIRE_SYNAPSE=1 makes the Matrix tests mandatory")
        print(f"skipping: {exc}")
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    server = getattr(item, "funcargs", {}).get("synapse")
    if report.failed and isinstance(server, Synapse):
        report.sections.append((f"synapse log (end of {server.log_path})", server.log_tail()))
    return report
