"""One thread for every llama.cpp call a server makes: its loads' timed passes and its requests.

llama.cpp's CPU backend in llama-cpp-python's wheel runs a pass on OpenMP
threads, and once the main thread has made passes, a pass made from any
other thread costs about a quarter more. Qwen2.5-Coder-0.5B on 2 threads,
streaming one completion (scratch, ``docs/serving.md``): from the main
thread 21.4-23.4 ms a token, then from three other threads in turn
26.9-28.9 ms, from the main thread again 21.4 ms; from one other thread
alone 20.6-22.6 ms. llama-cpp-python's server runs each request, and each
token of a stream, on whichever worker thread of its pool is free, after
the model's load made its timed passes on the main thread; llama-server
makes every pass on one thread of its own. :class:`DecodeThread` is that
thread for ``ngramdraft serve``: a call runs on it and returns what it
returned, a stream is made on it ahead of the reader, into a queue.
"""

import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class DecodeThread:
    """A thread that runs every call given to it, one at a time, in the caller's context."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="ngramdraft-decode"
        )
        self._ident = self._pool.submit(threading.get_ident).result()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the thread: its result, or its exception raised here."""
        if threading.get_ident() == self._ident:  # a call made from a call: already there
            return fn(*args, **kwargs)
        context = contextvars.copy_context()  # the request's, for what it counts
        return self._pool.submit(context.run, fn, *args, **kwargs).result()

    def stream(self, make: Callable[[], Iterator[T]]) -> Iterator[T]:
        """The items of ``make()``, made on the thread ahead of the reader.

        A reader that stops early (a client gone) closes this generator: the
        thread stops after the item it is making, and the generator returns
        once it has. The next call cannot share the model with it either
        way: the thread makes one thing at a time.
        """
        if threading.get_ident() == self._ident:
            yield from make()
            return
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        stop = threading.Event()

        def produce() -> None:
            try:
                made = make()
                try:
                    for item in made:
                        items.put(item)
                        if stop.is_set():
                            break
                finally:
                    close = getattr(made, "close", None)
                    if close is not None:
                        close()
            except BaseException as error:  # the reader's to raise, as without the thread
                items.put(_Failed(error))
            items.put(_END)

        done = self._pool.submit(contextvars.copy_context().run, produce)
        try:
            while (item := items.get()) is not _END:
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            stop.set()
            # Collected on the thread itself (a reader dropped while it makes the next
            # stream), the generator would wait for its own work: there it only asks it
            # to stop, which it does after the item in hand.
            if threading.get_ident() != self._ident:
                done.result()
