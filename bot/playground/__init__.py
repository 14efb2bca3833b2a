"""The local playground: ``python -m bot`` without a Discord token.

A Discord-compatible server on loopback (:mod:`fakediscord`) and a small web page to
use it, in one process; the real bot in a process of its own, connected to that
server as to Discord, which the page can stop, kill and start again. So the product
runs out of the box, and what it promises after downtime can be watched. See
:mod:`bot.playground.app`.
"""

from __future__ import annotations

from bot.playground.app import Playground, PlaygroundError, playground_config, run_playground

__all__ = ["Playground", "PlaygroundError", "playground_config", "run_playground"]
