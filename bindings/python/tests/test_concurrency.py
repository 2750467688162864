"""Threads, cancellation, memory, and processes (fork vs spawn)."""

import multiprocessing as mp
import threading
import time

import pytest

import moonlm

PROMPTS = ["Once upon a time", "One day, a big bear", "The little dog was sad because"]


def test_two_threads_generating_at_once(model):
    want = {p: model.generate(p, max_tokens=48, temperature=0) for p in PROMPTS[:2]}
    got = {}
    errors = []
    start = threading.Barrier(2)

    def run(p):
        try:
            start.wait()
            for _ in range(3):
                got[p] = model.generate(p, max_tokens=48, temperature=0)
        except Exception as e:  # reported below; a thread cannot fail the test itself
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in want]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert got == want


def test_cancel_pending_is_consumed_by_one_call(model):
    toks = model.tokenize("Once upon a time")
    with model.session() as s:
        s.cancel()
        with pytest.raises(moonlm.CancelledError):
            s.prefill(toks)
        assert s.position == 0
        s.prefill(toks)  # the request was consumed: this one runs
        assert s.position == len(toks)


def test_cancel_from_another_thread(model):
    with model.session(n_ctx=256) as s, moonlm.Sampler(temperature=0) as sm:
        running = threading.Event()

        def canceller():
            running.wait(10)
            time.sleep(0.05)
            s.cancel()

        t = threading.Thread(target=canceller)
        t.start()
        deadline = time.monotonic() + 20
        cancelled = False
        logits = s.prefill([1])
        running.set()
        while time.monotonic() < deadline:
            try:
                if s.position >= s.n_ctx:
                    s.rewind(1)
                logits = s.decode(sm.sample(logits))
            except moonlm.CancelledError:
                cancelled = True
                break
        t.join()
        assert cancelled
        # and the session still works afterwards
        pos = s.position
        s.decode(403)
        assert s.position == pos + 1


def rss_bytes():
    with open("/proc/self/statm") as f:
        import os

        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_session_create_free_cycles_do_not_grow_memory(model):
    def cycle(n):
        for _ in range(n):
            s = model.session()  # default context: 2048 positions of KV cache
            s.prefill([1, 403])
            s.close()

    cycle(100)  # let allocators and the Go heap reach their steady state
    before = rss_bytes()
    cycle(1000)
    grown = rss_bytes() - before
    # A leaked session would keep ~1.3 MB of KV cache: 1000 of them ~1.3 GB.
    assert grown < 64 << 20, f"RSS grew by {grown >> 20} MiB over 1000 sessions"


def test_sessions_freed_by_garbage_collection(model):
    import gc

    def cycle(n):
        for _ in range(n):
            model.session().prefill([1, 403])  # never closed explicitly
        gc.collect()

    cycle(100)
    before = rss_bytes()
    cycle(500)
    assert rss_bytes() - before < 64 << 20


# Children run at module level so that "spawn" can import them.


def _child_uses_parent_model(model, q):
    try:
        model.tokenize("Once upon a time")
        q.put(("ok", ""))
    except moonlm.ForkedError as e:
        q.put(("ForkedError", str(e)))
    except Exception as e:  # pragma: no cover - reported to the parent
        q.put((type(e).__name__, str(e)))


def _child_opens_model(path, q):
    try:
        with moonlm.Model(path, n_threads=1) as m:
            q.put(("ok", m.generate("Once upon a time", max_tokens=16, temperature=0)))
    except Exception as e:  # pragma: no cover - reported to the parent
        q.put((type(e).__name__, str(e)))


def test_fork_child_gets_a_clear_error(model):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_uses_parent_model, args=(model, q))
    p.start()
    kind, msg = q.get(timeout=30)
    p.join(30)
    assert kind == "ForkedError", msg
    assert "fork" in msg


def test_spawn_child_works(model, stories_path):
    want = model.generate("Once upon a time", max_tokens=16, temperature=0)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child_opens_model, args=(stories_path, q))
    p.start()
    kind, text = q.get(timeout=60)
    p.join(30)
    assert kind == "ok", text
    assert text == want


def test_library_calls_release_the_gil(model):
    # While one thread is inside a long prefill, another runs Python code:
    # impossible if the call held the GIL.
    toks = [1] + [259 + i % 200 for i in range(599)]
    window = {}
    with model.session(n_ctx=600) as s:

        def work():
            for _ in range(2):
                s.rewind(0)
                t0 = time.perf_counter()
                s.prefill(toks)
                t1 = time.perf_counter()
                if t1 - t0 > window.get("len", 0):
                    window.update(len=t1 - t0, t0=t0, t1=t1)

        th = threading.Thread(target=work)
        stamps = []
        th.start()
        while th.is_alive():
            stamps.append(time.perf_counter())
            time.sleep(0.001)
        th.join()
    if window["len"] < 0.02:
        pytest.skip(f"the longest prefill took {window['len'] * 1e3:.1f} ms: too short to tell")
    inside = [t for t in stamps if window["t0"] < t < window["t1"]]
    assert len(inside) >= 3, f"{len(inside)} main-thread steps during a {window['len'] * 1e3:.0f} ms prefill"


def test_second_thread_on_a_busy_session_gets_busy_error(model):
    toks = [1] + [259 + i % 200 for i in range(599)]
    busy = 0
    with model.session(n_ctx=600) as s:
        th = threading.Thread(target=s.prefill, args=(toks,))
        th.start()
        while th.is_alive():
            try:
                _ = s.position
            except moonlm.BusyError as e:
                busy += 1
                assert e.status == 8 and str(e)  # the library's message
            time.sleep(0.001)
        th.join()
        assert s.position == len(toks)
    assert busy > 0
