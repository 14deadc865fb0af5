"""`integrations/decode_thread.py`: every call and stream made on one thread, in order,
with the caller's context, results and exceptions, and a reader that stops early."""

import contextvars
import threading

import pytest

from ngramdraft.integrations.decode_thread import DecodeThread

REQUEST = contextvars.ContextVar("request", default=None)


def test_calls_and_streams_run_on_one_thread_in_the_callers_context():
    thread = DecodeThread()
    seen = set()

    def where(x):
        seen.add(threading.get_ident())
        return x, REQUEST.get()

    def items(n):
        for i in range(n):
            yield where(i)

    workers = []
    for k in range(4):  # from several callers' threads, as the host's server calls

        def ask(k=k):
            REQUEST.set(k)
            assert thread.call(where, "x") == ("x", k)
            assert list(thread.stream(lambda: items(3))) == [(i, k) for i in range(3)]

        workers.append(threading.Thread(target=ask))
        workers[-1].start()
    for w in workers:
        w.join()
    assert len(seen) == 1 and threading.get_ident() not in seen
    assert thread.call(lambda: thread.call(where, 1)) == (1, None)  # nested: no deadlock


def test_exceptions_reach_the_caller():
    thread = DecodeThread()

    def fails():
        raise ValueError("no")

    def stream_fails():
        yield 1
        raise KeyError("late")

    with pytest.raises(ValueError, match="no"):
        thread.call(fails)
    got = thread.stream(stream_fails)
    assert next(got) == 1
    with pytest.raises(KeyError, match="late"):
        next(got)
    assert thread.call(lambda: 2) == 2  # the thread goes on


def test_a_reader_that_stops_early_stops_the_stream_and_the_thread_goes_on():
    thread = DecodeThread()
    made, closed = [], threading.Event()

    def endless():
        try:
            i = 0
            while True:
                made.append(i)
                yield i
                i += 1
        finally:
            closed.set()

    got = thread.stream(endless)
    assert [next(got) for _ in range(3)] == [0, 1, 2]
    got.close()  # returns once the thread has stopped
    assert closed.is_set()
    n = len(made)
    assert thread.call(lambda: len(made)) == n


def test_a_reader_dropped_on_the_thread_itself_does_not_wait_for_itself():
    """The server hung: a client gone, the host dropped its stream's reader, and the
    collector finalized it on the decode thread, inside that stream's own work, where it
    waited for that work to end."""
    thread = DecodeThread()
    box, read = {}, threading.Event()

    def endless():
        i = 0
        while True:
            if i == 1:  # the reader, waiting at its first item, collected here
                read.wait()
                box.pop("reader").close()
            yield i
            i += 1

    box["reader"] = thread.stream(endless)
    assert next(box["reader"]) == 0
    read.set()
    went_on = threading.Thread(target=lambda: box.setdefault("then", thread.call(len, "ab")))
    went_on.start()
    went_on.join(60)  # a hang, not a timing: it returns at once or never
    assert box.get("then") == 2
