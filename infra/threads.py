"""A blocking wait or check run off the program's event loop (one home for the program's waits: the grants'
propagation, the platform's live checks, the steps' waits)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_daemon_thread(work: Callable[[], T], name: str) -> asyncio.Future[T]:
    """Run ``work`` in a daemon thread, which an interrupted program does not join (Ctrl-C or SIGTERM ends it at
    once, the step left running), as a Future an ``apply`` can return; nothing is handed back once the program's
    event loop is closed."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], object], value: Any) -> None:
        if not future.done():
            setter(value)

    def run() -> None:
        try:
            result: Any = work()
            setter: Callable[[Any], object] = future.set_result
        except BaseException as err:  # noqa: BLE001 (handed to the program's event loop)
            result, setter = err, future.set_exception
        with contextlib.suppress(RuntimeError):  # the loop is closed: the program is gone
            loop.call_soon_threadsafe(settle, setter, result)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
