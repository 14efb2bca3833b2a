"""A real Matrix homeserver for tests: Synapse, from the dev dependencies.

`running_synapse()` writes a homeserver config into a directory of its own (SQLite,
one client listener on 127.0.0.1 at a free port, registration only by shared secret,
no federation, no key servers, no stats), starts ``python -m synapse.app.homeserver``
with its log in that directory, waits until ``/_matrix/client/versions`` answers and
registers the bot and two people by the shared secret. On the way out it terminates
the server (then kills it if it does not stop). The log stays where it was written.

The homeserver's rate limits are Synapse's own defaults: nothing here raises them,
so whatever talks to it must live with ``M_LIMIT_EXCEEDED`` as it would in real use.

Synapse's absence, or a server that does not come up, is a `SynapseUnavailable`
whose message says why; the fixture turns it into a skip, or a failure under
``THREADBOUND_REQUIRE_SYNAPSE=1``.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import ClientSession
from mautrix.client import Client

SERVER_NAME = "example.org"
START_TIMEOUT = 60.0  # seconds; it starts in about 2 s here, a loaded CI machine is slower
STOP_TIMEOUT = 10.0
LOG_NAME = "homeserver.log"


class SynapseUnavailable(Exception):
    """Synapse is not installed, or its server did not come up; the message says which."""


@dataclass(frozen=True)
class MatrixUser:
    """An account on the test homeserver, logged in once by its registration."""

    user_id: str
    access_token: str
    device_id: str

    def __repr__(self) -> str:  # an access token never reaches a test's output
        return f"MatrixUser({self.user_id!r})"


@dataclass(frozen=True)
class Synapse:
    """A running homeserver: where it answers, its accounts, and its log."""

    base_url: str
    server_name: str
    log_path: Path
    shared_secret: str
    bot: MatrixUser
    owner: MatrixUser  # a plain account: a room's creator gets power level 100 there
    other: MatrixUser

    def __repr__(self) -> str:
        return f"Synapse({self.base_url!r}, log={str(self.log_path)!r})"

    def register(self, localpart: str, *, admin: bool = False) -> MatrixUser:
        """Register one more account (a server admin when ``admin``)."""
        return register_user(self.base_url, self.shared_secret, localpart, admin=admin)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no homeserver log: {exc})"
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def homeserver_config(directory: Path, port: int, shared_secret: str) -> dict[str, Any]:
    """A homeserver that talks to nothing but loopback clients; rate limits as shipped."""
    return {
        "server_name": SERVER_NAME,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(directory / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(directory / "homeserver.db")}},
        "media_store_path": str(directory / "media"),
        "signing_key_path": str(directory / "signing.key"),  # generated on first start
        "registration_shared_secret": shared_secret,
        "enable_registration": False,
        "macaroon_secret_key": secrets.token_hex(32),
        "form_secret": secrets.token_hex(32),
        "report_stats": False,
        "trusted_key_servers": [],  # no fetching keys from matrix.org
        "federation_domain_whitelist": [],  # federate with nobody
        "url_preview_enabled": False,
        "presence": {"enabled": False},
    }


def _http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"} if data else {}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def register_user(
    base_url: str, shared_secret: str, localpart: str, *, admin: bool = False
) -> MatrixUser:
    """Register ``localpart`` through Synapse's shared-secret admin API (an HMAC of a nonce)."""
    url = f"{base_url}/_synapse/admin/v1/register"
    nonce = _http_json(url)["nonce"]
    password = secrets.token_urlsafe(16)
    signed = "\x00".join((nonce, localpart, password, "admin" if admin else "notadmin"))
    mac = hmac.new(shared_secret.encode(), signed.encode(), digestmod=hashlib.sha1)
    body = {
        "nonce": nonce,
        "username": localpart,
        "password": password,
        "admin": admin,
        "mac": mac.hexdigest(),
    }
    answer = _http_json(url, body)
    return MatrixUser(answer["user_id"], answer["access_token"], answer["device_id"])


def _wait_until_up(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> float:
    started = time.monotonic()
    problem = "no answer yet"
    while time.monotonic() - started < START_TIMEOUT:
        if (code := process.poll()) is not None:
            raise SynapseUnavailable(
                f"Synapse exited with code {code} before answering; its log is {log_path}"
            )
        try:
            _http_json(f"{base_url}/_matrix/client/versions", timeout=2.0)
            return time.monotonic() - started
        except (OSError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        time.sleep(0.05)  # polling a starting process: there is no event to await
    raise SynapseUnavailable(
        f"Synapse did not answer within {START_TIMEOUT:.0f} s ({problem}); its log is {log_path}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_TIMEOUT)


@contextmanager
def running_synapse(
    directory: Path, *, extra_config: dict[str, Any] | None = None
) -> Iterator[Synapse]:
    """Start a homeserver in ``directory``, with ``bot``, ``owner`` and ``other`` registered.

    ``extra_config`` adds or replaces top-level keys of the homeserver's config (an
    application service's registration, say); the defaults keep the rate limits as shipped.

    Raises:
        SynapseUnavailable: Synapse is not installed, or did not come up; says why.
    """
    if importlib.util.find_spec("synapse") is None:
        raise SynapseUnavailable("matrix-synapse is not installed (pip install -e '.[dev]')")
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    shared_secret = secrets.token_hex(32)
    config_path = directory / "homeserver.yaml"
    # YAML is a superset of JSON: no YAML writer needed
    config = homeserver_config(directory, port, shared_secret) | (extra_config or {})
    config_path.write_text(json.dumps(config))
    log_path = directory / LOG_NAME
    base_url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(config_path)],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        took = _wait_until_up(base_url, process, log_path)
        print(f"synapse: up at {base_url} in {took:.1f} s; log {log_path}")
        try:
            users = [register_user(base_url, shared_secret, name) for name in USERS]
        except (OSError, ValueError, KeyError) as exc:
            raise SynapseUnavailable(
                f"registering the test accounts failed ({type(exc).__name__}: {exc}); "
                f"its log is {log_path}"
            ) from exc
        bot, owner, other = users
        yield Synapse(base_url, SERVER_NAME, log_path, shared_secret, bot, owner, other)
    finally:
        _stop(process)


USERS = ("threadbound", "owner", "someone")


@asynccontextmanager
async def matrix_client(server: Synapse, user: MatrixUser) -> AsyncIterator[Client]:
    """A mautrix ``Client`` logged in as ``user``: a person's (or the bot's) real client."""
    async with ClientSession() as session:
        yield Client(
            mxid=user.user_id,
            device_id=user.device_id,
            base_url=server.base_url,
            token=user.access_token,
            client_session=session,
        )
