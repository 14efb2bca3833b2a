"""App commands, one module per feature; each exposes a function that builds its commands."""
