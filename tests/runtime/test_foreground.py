"""Background work holds back while a push is served: ``quiet`` returns once nothing is
served, and gives up after its bound so background work is never starved."""

from __future__ import annotations

import threading

from app.runtime.foreground import Foreground


def test_quiet_at_once_when_nothing_is_served() -> None:
    assert Foreground().quiet(0.0) is True


def test_quiet_gives_up_after_its_bound_while_something_is_served() -> None:
    foreground = Foreground()
    with foreground.serving():
        assert foreground.quiet(0.01) is False
    assert foreground.quiet(0.0) is True


def test_quiet_returns_when_the_last_push_is_served() -> None:
    foreground = Foreground()
    entered, release = threading.Event(), threading.Event()

    def push() -> None:
        with foreground.serving(), foreground.serving():  # two at once
            entered.set()
            release.wait(30)

    thread = threading.Thread(target=push)
    thread.start()
    assert entered.wait(30)
    assert foreground.quiet(0.0) is False
    release.set()
    assert foreground.quiet(30) is True  # woken by the last one ending, not by the bound
    thread.join(30)
