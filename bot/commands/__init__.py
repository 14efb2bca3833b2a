"""App commands, one module per feature, one class per feature.

A command with subcommands (``/agents``, ``/config``, ``/session``) is an
:class:`discord.app_commands.Group` subclass, its subcommands its methods. A
feature's top-level commands (``/steer``, ``/tree``, ``/model`` …) are the
methods of a small class holding the account, made into commands by its
``commands()``. :mod:`bot.client` registers them from one list.
"""
