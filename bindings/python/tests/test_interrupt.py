"""Ctrl-C during a long native call stops it promptly (a KeyboardInterrupt,
the session left as it was), instead of arriving only after it returns."""

import os
import signal
import subprocess
import sys
import time

from conftest import REPO, default_model

# The child: a prefill of the real model that takes many seconds uninterrupted.
CHILD = r"""
import sys, time, moonlm
m = moonlm.Model(sys.argv[1], n_threads=2, pack=False, packed_cache=False)
mode = sys.argv[2]
the = m.tokenize(" the", add_special=False)[0]
toks = [m.bos_token_id] + [the] * 2000
s = m.session(n_ctx=2048)
print("started", flush=True)
try:
    if mode == "prefill":
        s.prefill(toks)
    elif mode == "decode":
        # A short prompt and many tokens: the signal lands while decoding.
        for piece in m.generate(toks[:17], max_tokens=1500, temperature=0, n_ctx=2048, stream=True):
            pass
    else:
        m.generate(toks, max_tokens=8, temperature=0, n_ctx=2048)
except KeyboardInterrupt:
    # The session is as it was and usable: no cancel request left behind.
    print("interrupted", s.position, flush=True)
    s.prefill(toks[:4])
    print("after", s.position, flush=True)
    raise
print("finished", flush=True)
"""


def run_and_interrupt(mode):
    env = dict(os.environ, PYTHONPATH=str(REPO / "bindings" / "python" / "src"))
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, default_model("SmolLM2-135M-Instruct.Q4_1.gguf"), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(0.5)  # well inside the prefill
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        latency = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err, latency


def check(mode):
    rc, out, err, latency = run_and_interrupt(mode)
    assert "KeyboardInterrupt" in err, err
    # Python re-raises SIGINT to die of it after an uncaught KeyboardInterrupt.
    assert rc == -signal.SIGINT, (rc, err)
    assert out.split("\n")[:2] == ["interrupted 0", "after 4"], out
    # Uninterrupted, the 2001-token prefill takes several seconds on two cores.
    assert latency < 3.0, f"{latency:.2f}s from SIGINT to exit"


def test_ctrl_c_cancels_a_long_prefill():
    check("prefill")


def test_ctrl_c_cancels_generate_during_its_prefill():
    check("generate")


def test_ctrl_c_cancels_a_streamed_generate_while_it_decodes():
    check("decode")
