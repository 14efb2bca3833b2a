"""Which prompt a reaction is on, when the homeserver cannot say: a reaction is never
dropped for a failure worth retrying (the sync batch is read again), only for an answer."""

from __future__ import annotations

from typing import Any

import pytest
from mautrix.errors import MatrixConnectionError, MNotFound

from adapters.matrix.approvals import MatrixApprovals


class Api:
    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    async def request(self, *_args: Any, **_kwargs: Any) -> Any:
        raise self.failure


class Client:
    mxid = "@threadbound:example.org"

    def __init__(self, failure: Exception) -> None:
        self.api = Api(failure)


def approvals(failure: Exception) -> MatrixApprovals:
    return MatrixApprovals(
        "default",
        Client(failure),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        admin_level=100,
    )


async def test_a_dropped_connection_is_raised_so_the_batch_is_read_again() -> None:
    with pytest.raises(MatrixConnectionError):
        await approvals(MatrixConnectionError("dropped"))._prompt("!r:x", "$e")


async def test_an_event_the_homeserver_does_not_know_is_no_prompt() -> None:
    assert await approvals(MNotFound(404, "Event not found"))._prompt("!r:x", "$e") is None
