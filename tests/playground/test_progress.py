"""The terminal progress line: rewritten in place on a TTY, plain changed lines otherwise."""

from __future__ import annotations

import io

from bot.playground.progress import Counts, Progress, format_line

URL = "http://127.0.0.1:8765/"


class Figures:
    def __init__(self) -> None:
        self.counts = Counts(sessions=0, bindings=0, deliveries=0)

    def __call__(self) -> Counts:
        return self.counts


def test_line_names_every_figure_and_the_url() -> None:
    line = format_line(Counts(sessions=2, bindings=3, deliveries=14), URL)
    assert line == f"playground {URL} · live sessions 2 · bindings 3 · deliveries 14"


def test_terminal_rewrites_in_place_and_ends_the_line_on_stop() -> None:
    stream, figures = io.StringIO(), Figures()
    progress = Progress(stream, figures, URL, interactive=True)
    progress.tick()
    figures.counts = Counts(sessions=1, bindings=1, deliveries=5)
    progress.tick()
    assert stream.getvalue().count("\r") == 2
    assert "\n" not in stream.getvalue()
    assert stream.getvalue().endswith("deliveries 5")


async def test_stop_ends_the_rewritten_line() -> None:
    stream = io.StringIO()
    progress = Progress(stream, Figures(), URL, interactive=True)
    progress.tick()
    await progress.stop()
    assert stream.getvalue().endswith("\n")


def test_pipe_gets_a_line_only_when_something_changed() -> None:
    stream, figures = io.StringIO(), Figures()
    progress = Progress(stream, figures, URL)  # StringIO is not a TTY
    assert not progress.interactive
    progress.tick()
    progress.tick()
    figures.counts = Counts(sessions=1, bindings=1, deliveries=1)
    progress.tick()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert "\r" not in stream.getvalue()
    assert lines[-1].endswith("deliveries 1")
