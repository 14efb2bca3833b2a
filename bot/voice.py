"""The bot has no voice: discord.py's two warnings about voice libraries are turned off.

Creating a client without PyNaCl or davey makes discord.py log "PyNaCl is not
installed, voice will NOT be supported" and the same for davey, at every start.
threadbound never joins a voice channel, so these only alarm whoever starts it.
discord.py's own switches for exactly these two warnings are cleared; every other
warning of discord.py still shows.
"""

from __future__ import annotations

import discord

__all__ = ["silence_voice_warnings"]


def silence_voice_warnings() -> None:
    """Before the first client is created: no warning about missing voice libraries."""
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False
