"""The local playground: ``python -m bot`` without a Discord token.

A Discord-compatible server on loopback (:mod:`fakediscord`), the real bot
connected to it, and a small web page to use it, so the product runs out of
the box. See :mod:`bot.playground.app`.
"""

from __future__ import annotations

from bot.playground.app import Playground, PlaygroundError, playground_config, run_playground

__all__ = ["Playground", "PlaygroundError", "playground_config", "run_playground"]
