"""Waiting in tests without ever hanging: a deadlock must fail fast, with a message.

Tests never sleep to wait; they sync. A sync point that could deadlock runs through
:func:`within`, which calls it in a helper thread and fails the test if it has not
returned after ``timeout`` seconds (pytest-timeout is only the last resort).
"""

from __future__ import annotations

import threading
from typing import Any, Callable


def within(fn: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Call ``fn()`` in a thread; fail if it does not return in time (a deadlock)."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"deadlock: {fn} did not return within {timeout}s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
