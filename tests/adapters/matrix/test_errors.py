"""adapters.matrix.errors: how a homeserver's refusal is told, and which are retried."""

from __future__ import annotations

import aiohttp
import pytest
from mautrix.errors import MForbidden, MLimitExceeded, MUnknownToken

from adapters.matrix.errors import is_retryable, matrix_said


class TestErrors:
    @pytest.mark.parametrize(
        ("exc", "said", "retry"),
        [
            (MLimitExceeded(429, "Too Many Requests"), "HTTP 429, M_LIMIT_EXCEEDED", True),
            (MForbidden(403, "You are not invited"), "HTTP 403, M_FORBIDDEN, You are", False),
            (MUnknownToken(401, "Invalid token"), "HTTP 401, M_UNKNOWN_TOKEN", False),
            (aiohttp.ClientConnectionError("reset"), "ClientConnectionError: reset", True),
            (TimeoutError(), "TimeoutError", True),
        ],
    )
    def test_what_the_homeserver_said(self, exc: Exception, said: str, retry: bool) -> None:
        """Failures are told as status, errcode and message; only transient ones are retried."""
        assert matrix_said(exc).startswith(said)
        assert is_retryable(exc) is retry
