"""Scheduled work: jobs that post into bound threads and channels, each run exactly once."""

from __future__ import annotations
