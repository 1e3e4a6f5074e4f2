"""The send loop: one asyncio loop on a daemon thread per worker process, where provider
calls that wait on the network run concurrently.

The worker's consumer thread claims a batch and hands its sends here
(:meth:`SendLoop.submit`), then goes back to fetching messages: a 20 ms provider never holds
it up. Providers with a native asynchronous client (:meth:`Provider.send_async`) are awaited
on the loop; the others run in the loop's thread pool (:data:`SEND_THREADS` threads). The
loop is uvloop's when uvloop is installed, unless the ``send_loop`` setting says ``asyncio``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from noti.providers import _http11

__all__ = ["RECORD_THREADS", "SEND_THREADS", "SendLoop", "new_loop", "send_loop"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds sends still running may take when the interpreter exits.
EXIT_TIMEOUT_S = 2.0
#: Threads for blocking provider calls started from the loop.
SEND_THREADS = 64
#: Threads that record outcomes (finish script calls), apart from the send threads: an
#: outcome never waits for a thread behind blocking provider calls (slow vendors, sends
#: waiting for a rate limit's token), where a worker killed meanwhile would send it again.
RECORD_THREADS = 4


class SendLoop:
    """An asyncio loop running on its own daemon thread (started on first use)."""

    def __init__(self, name: str = "noti-send-loop", kind: str = "auto") -> None:
        self.name = name
        #: Which event loop to run (the ``send_loop`` setting: :func:`new_loop`).
        self.kind = kind
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._recorder: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if it was not)."""
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                self._loop = new_loop(self.kind)
                self._loop.set_default_executor(
                    concurrent.futures.ThreadPoolExecutor(SEND_THREADS, thread_name_prefix="noti-send")
                )
                ready = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._loop, ready), name=self.name, daemon=True
                )
                self._thread.start()
                ready.wait()
            return self._loop

    @property
    def recorder(self) -> concurrent.futures.Executor:
        """The threads that record outcomes (:data:`RECORD_THREADS`), for the loop's
        ``run_in_executor``."""
        with self._lock:
            if self._recorder is None:
                self._recorder = concurrent.futures.ThreadPoolExecutor(
                    RECORD_THREADS, thread_name_prefix="noti-record"
                )
            return self._recorder

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop; thread-safe. Its result or exception is in the future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Let running sends finish (up to ``timeout_s``), close the HTTP session, stop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or not thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._drain(timeout_s), loop).result(timeout_s + 5)
        except Exception:  # stopping anyway
            log.warning("send loop: sends still running at shutdown", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        with self._lock:
            recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.shutdown(wait=False)

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()
        loop.close()

    @staticmethod
    async def _drain(timeout_s: float) -> None:
        current = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not current]
        if others:
            await asyncio.wait(others, timeout=timeout_s)
        await _http11.close_pool()


def new_loop(kind: str = "auto") -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's for ``auto`` when uvloop is installed (measured: ~5 % less
    worker CPU per 20 ms webhook, the ``send_loop`` setting), else asyncio's."""
    if kind == "auto":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


_loops: dict[int, SendLoop] = {}
_loops_lock = threading.Lock()


def send_loop() -> SendLoop:
    """This process's send loop (a new one after a fork: threads do not survive it)."""
    with _loops_lock:
        current = _loops.get(os.getpid())
        if current is None:
            _loops.clear()
            from noti.sending.runtime import get_runtime  # the settings of now (tests reconfigure)

            current = _loops[os.getpid()] = SendLoop(kind=get_runtime().settings.send_loop)
            atexit.register(current.stop, EXIT_TIMEOUT_S)
        return current
