"""The engine in a real browser: build/web (make web) served from a
loopback static server, models picked through the page's file input in
headless Chromium, driven by Playwright with the system Chromium.

Environment: MOONLM_WEB_DIR (build/web), MOONLM_TESTDATA (the shared test
data), MOONLM_MODELS (SmolLM2 Q4_1), MOONLM_CLI (the native build, for the
ids it must match). Each test skips, saying why, when something is absent.
"""

import functools
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WEB_DIR = os.environ.get("MOONLM_WEB_DIR", os.path.join(ROOT, "build", "web"))
TESTDATA = os.environ.get("MOONLM_TESTDATA", os.path.join(ROOT, "..", "shared", "testdata"))
MODELS = os.environ.get("MOONLM_MODELS", os.path.join(ROOT, "build", "models"))
CLI = os.environ.get("MOONLM_CLI", os.path.join(ROOT, "build", "moonlm"))
SMOLLM2 = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")


def chromium_path():
    """The system Chromium's binary (Debian's /usr/bin/chromium is a shell
    wrapper; Playwright wants the executable itself)."""
    for p in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "",
              shutil.which("chromium-browser") or ""):
        if p and os.access(p, os.X_OK):
            return p
    return None


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript"}

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    if not os.path.exists(os.path.join(WEB_DIR, "moonlm.wasm")):
        pytest.skip(f"{WEB_DIR}/moonlm.wasm is absent (make web)")
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=WEB_DIR))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (make web-venv)")
    exe = chromium_path()
    if exe is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    # Chromium writes its settings and caches under HOME and the XDG
    # folders even with a temporary profile: give it a home of its own, so
    # the tests never write into the user's.
    home = tempfile.mkdtemp(prefix="moonlm-web-home-")
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, "config"),
               XDG_CACHE_HOME=os.path.join(home, "cache"), XDG_DATA_HOME=os.path.join(home, "data"))
    try:
        with playwright_api.sync_playwright() as pw:
            b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"], env=env)
            yield b
            b.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def page(browser, server):
    pg = browser.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(server)
    yield pg
    pg.close()
    assert not errors, f"errors on the page: {errors}"


def load_model(page, path, timeout_ms=120_000):
    page.set_input_files("#model", path)
    page.wait_for_function(
        "() => document.querySelector('#status').dataset.loaded === 'true'"
        " || document.querySelector('#status').textContent.startsWith('error')",
        timeout=timeout_ms)
    status = page.text_content("#status")
    assert not status.startswith("error"), status
    return status


def generate(page, prompt, max_tokens, timeout_ms=300_000):
    page.fill("#prompt", prompt)
    page.fill("#maxTokens", str(max_tokens))
    assert page.input_value("#temperature") == "0", "the page defaults to greedy"
    page.click("#generate")
    page.wait_for_function("() => document.querySelector('#stats').dataset.done === 'true'",
                           timeout=timeout_ms)
    stats = page.text_content("#stats")
    assert not stats.startswith("error"), stats
    ids = [int(x) for x in page.eval_on_selector("#ids", "e => e.value").split()]
    return page.text_content("#output"), ids, stats, page.eval_on_selector("#stats", "e => ({...e.dataset})")


def test_stories260k_golden(page):
    model = os.path.join(TESTDATA, "models", "stories260K.gguf")
    if not os.path.exists(model):
        pytest.skip(f"{model} is absent (shared test data)")
    with open(os.path.join(TESTDATA, "models", "stories260K.golden.txt")) as f:
        golden = f.read().strip()
    load_model(page, model)
    text, ids, stats, data = generate(page, "", 200)
    assert len(ids) == 200, stats
    text = text.removeprefix(" ")
    n = min(len(text), len(golden))
    assert n > 200, text
    assert text[:n] == golden[:n]
    print(f"\nstories260K in Chromium: {stats}")


def native_tokens(model, text):
    out = subprocess.run([CLI, "tokenize", "-m", model, text], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()]


API_CHECKS = """async () => {
  const lm = window.moonlm;
  const ids = Array.from(await lm.tokenize('Once upon a time, there was', { addSpecial: true }));
  const back = await lm.detokenize(ids.slice(1));
  // abort: an unlimited generation stopped after its first piece
  const run = lm.generate('', { maxTokens: 0 });
  let pieces = 0;
  for await (const text of run) { if (++pieces === 1) lm.abort(); }
  const aborted = await run.result;
  // an abort with nothing running must not cancel the next generation
  lm.abort();
  const after = await lm.generate('', { maxTokens: 5 }).result;
  let chatError = null;
  try { for await (const t of lm.chat([{ role: 'user', content: 'hi' }])) {} } catch (e) { chatError = e.message; }
  let badIds = null;
  try { await lm.generate([1, 1e9]).result; } catch (e) { badIds = e.message; }
  return { ids, back, aborted, after, chatError, badIds, memory: await lm.memory() };
}"""


def test_api_stories260k(page):
    model = os.path.join(TESTDATA, "models", "stories260K.gguf")
    if not os.path.exists(model):
        pytest.skip(f"{model} is absent (shared test data)")
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"{CLI} is absent (make cli)")
    load_model(page, model)
    r = page.evaluate(API_CHECKS)
    assert r["ids"] == native_tokens(model, "Once upon a time, there was")
    assert r["back"].strip() == "Once upon a time, there was"
    assert r["aborted"]["finish"] == "cancelled", r["aborted"]
    assert 0 < r["aborted"]["tokens"] < 500, r["aborted"]
    assert r["after"]["finish"] == "length" and r["after"]["tokens"] == 5, r["after"]
    assert r["chatError"] and "template" in r["chatError"], r["chatError"]
    assert r["badIds"] and "id 1" in r["badIds"], r["badIds"]
    assert r["memory"]["wasmBytes"] > 0


def native_ids(prompt, n):
    """The ids the native build generates greedily with the generic
    kernels (the set the wasm build has)."""
    env = dict(os.environ, MOONLM_KERNELS="generic")
    t0 = time.time()
    out = subprocess.run(
        [CLI, "generate", "-m", SMOLLM2, "-p", prompt, "-n", str(n), "--temp", "0", "--ids", "-t", "1"],
        env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()], out.stderr, time.time() - t0


def test_smollm2_matches_native(page):
    if not os.path.exists(SMOLLM2):
        pytest.skip(f"{SMOLLM2} is absent (make models)")
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"{CLI} is absent (make cli)")
    prompt = "The capital of France is"
    want, native_log, _ = native_ids(prompt, 32)
    assert len(want) == 32, native_log
    load_model(page, SMOLLM2)
    _, ids, stats, data = generate(page, prompt, 32)
    assert ids == want
    # chat through the model's template, streamed, then ended by the limit
    # or the end-of-turn token
    r = page.evaluate("""async () => {
      const run = window.moonlm.chat([{ role: 'user', content: 'What is the capital of France?' }], { maxTokens: 8 });
      let text = '';
      for await (const t of run) text += t;
      return { text, result: await run.result };
    }""")
    assert r["result"]["finish"] in ("length", "eog"), r
    assert r["result"]["promptTokens"] > 10, "the template wraps the message"
    assert r["text"].strip(), r
    print(f"\nSmolLM2 Q4_1 in Chromium: {stats}; native (generic kernels, 1 thread): "
          f"{native_log.strip().splitlines()[-1] if native_log.strip() else ''}")


def test_engine_open_under_node():
    """The Go tests of cmd/moonlm-wasm compiled for js/wasm and run by Node
    (Go's go_js_wasm_exec): engine.Open's read-into-memory path, which the
    page does not use."""
    go = shutil.which("go")
    if go is None or shutil.which("node") is None:
        pytest.skip("go or node is not on PATH")
    goroot = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()
    runner = os.path.join(goroot, "lib", "wasm", "go_js_wasm_exec")
    if not os.path.exists(runner):
        runner = os.path.join(goroot, "misc", "wasm", "go_js_wasm_exec")
    env = dict(os.environ, GOOS="js", GOARCH="wasm", CGO_ENABLED="0",
               MOONLM_TESTDATA=os.path.abspath(TESTDATA))
    out = subprocess.run([go, "test", "-count=1", "-v", "-exec", runner, "./cmd/moonlm-wasm/"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "--- PASS: TestOpenFromPath" in out.stdout, out.stdout
