"""Model.from_pretrained and the Hub download behind it, against a fake Hub
on loopback started here (never the internet), with HF_HOME in tmp_path."""

import hashlib
import io
import json
import os
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import moonlm
from moonlm import _hub

from conftest import data_path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_secret"


def sha(b):
    return hashlib.sha256(b).hexdigest()


class FakeHub:
    """Answers like the Hub: file lists, resolve redirects (LFS files to a
    CDN on another port, with X-Linked-Etag/X-Linked-Size/X-Repo-Commit),
    small files directly, ranges, 401 for a private repository without the
    token, 404 with X-Error-Code. cut/corrupt/no_ranges misbehave once."""

    def __init__(self, files):
        self.files = files  # repo -> {name: bytes}
        self.private = {"org/gated"}
        self.cut = 0
        self.corrupt = False
        self.cdn_auth, self.cdn_ranges = [], []
        hub, cdn = self, self

        class Hub(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_HEAD(self):
                hub.serve_hub(self, body=False)

            def do_GET(self):
                hub.serve_hub(self, body=True)

        class CDN(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                cdn.serve_cdn(self)

        self.hub = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
        self.cdn = ThreadingHTTPServer(("127.0.0.1", 0), CDN)
        for s in (self.hub, self.cdn):
            threading.Thread(target=s.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.hub.server_address[1]
        self.cdn_url = "http://127.0.0.1:%d" % self.cdn.server_address[1]

    def close(self):
        for s in (self.hub, self.cdn):
            s.shutdown()
            s.server_close()

    def refuse(self, h, repo):
        if repo not in self.files:
            h.send_response(401)
            h.send_header("X-Error-Code", "RepoNotFound")
        elif repo in self.private and h.headers.get("Authorization") != "Bearer " + TOKEN:
            h.send_response(401)
            h.send_header("X-Error-Code", "GatedRepo")
            h.send_header("X-Error-Message", "Access to this repo is restricted")
        else:
            return False
        h.send_header("Content-Length", "0")
        h.end_headers()
        return True

    def serve_hub(self, h, body):
        parts = h.path.lstrip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo = parts[2] + "/" + parts[3]
            if self.refuse(h, repo):
                return
            out = json.dumps({"id": repo, "sha": COMMIT, "siblings": [{"rfilename": f} for f in self.files[repo]]}).encode()
            h.send_response(200)
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            h.wfile.write(out)
            return
        if len(parts) < 5 or parts[2] != "resolve":
            h.send_error(404)
            return
        repo, name = parts[0] + "/" + parts[1], "/".join(parts[4:])
        if self.refuse(h, repo):
            return
        data = self.files[repo].get(name)
        if data is None:
            h.send_response(404)
            h.send_header("X-Error-Code", "EntryNotFound")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(302 if name.endswith(".gguf") else 200)
        h.send_header("X-Repo-Commit", COMMIT)
        if name.endswith(".gguf"):
            h.send_header("ETag", '"not-the-sha"')
            h.send_header("X-Linked-Etag", '"%s"' % sha(data))
            h.send_header("X-Linked-Size", str(len(data)))
            h.send_header("Location", "%s/blobs/%s" % (self.cdn_url, sha(data)))
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_header("ETag", '"%040x"' % len(data))
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)

    def serve_cdn(self, h):
        self.cdn_auth.append(h.headers.get("Authorization"))
        rng = h.headers.get("Range")
        self.cdn_ranges.append(rng)
        want = h.path.rsplit("/", 1)[-1]
        data = next((d for fs in self.files.values() for d in fs.values() if sha(d) == want), None)
        if data is None:
            h.send_error(404)
            return
        if self.corrupt:
            self.corrupt = False
            data = bytearray(data)
            data[len(data) // 2] ^= 1
            data = bytes(data)
        if self.cut and not rng:
            cut, self.cut = self.cut, 0
            h.send_response(200)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[:cut])
            h.wfile.flush()
            h.close_connection = True
            return
        start = 0
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            h.send_response(206)
            h.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            h.send_response(200)
        h.send_header("Content-Length", str(len(data) - start))
        h.end_headers()
        h.wfile.write(data[start:])


@pytest.fixture
def stories_bytes():
    return Path(data_path("models/stories260K.gguf")).read_bytes()


@pytest.fixture
def fake(monkeypatch, tmp_path, stories_bytes):
    rng = random.Random(1)
    f = FakeHub({
        "org/model": {
            "stories260K-Q8_0.gguf": stories_bytes,
            "other-Q4_K_M.gguf": rng.randbytes(200_000),
            "README.md": b"# a model\n",
        },
        "org/gated": {"gated-Q4_0.gguf": rng.randbytes(1000)},
    })
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_ENDPOINT", f.url)
    for k in ("HF_HUB_CACHE", "HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(k, raising=False)
    yield f
    f.close()


def test_from_pretrained_downloads_into_the_hub_cache_and_opens(fake, tmp_path, model, capfd):
    with moonlm.Model.from_pretrained("org/model", "q8_0", n_threads=1) as m:
        got = m.generate("Once upon a time", max_tokens=12, temperature=0)
    assert got == model.generate("Once upon a time", max_tokens=12, temperature=0)
    repo = tmp_path / "hf" / "hub" / "models--org--model"
    pointer = repo / "snapshots" / COMMIT / "stories260K-Q8_0.gguf"
    data = fake.files["org/model"]["stories260K-Q8_0.gguf"]
    assert os.readlink(pointer) == os.path.join("..", "..", "blobs", sha(data))
    assert (repo / "refs" / "main").read_text() == COMMIT
    assert not list((repo / "blobs").glob("*.incomplete"))
    err = capfd.readouterr().err
    assert "stories260K-Q8_0.gguf" in err and "100%" in err and "done in" in err  # plain lines: not a terminal
    assert "\r" not in err
    # Again: from the cache, nothing downloaded; an exact name needs no listing.
    n = len(fake.cdn_ranges)
    moonlm.Model.from_pretrained("org/model", "stories260K-Q8_0.gguf", progress=False).close()
    moonlm.Model.from_pretrained("org/model", "*Q8_0.gguf", progress=False).close()
    assert len(fake.cdn_ranges) == n


def test_download_resumes_with_range(fake, tmp_path):
    hub = _hub.Hub()
    fake.cut = 70_000
    with pytest.raises(moonlm.HubError):
        hub.fetch("org/model", "Q4_K_M")
    data = fake.files["org/model"]["other-Q4_K_M.gguf"]
    part = tmp_path / "hf" / "hub" / "models--org--model" / "blobs" / (sha(data) + ".incomplete")
    assert part.stat().st_size == 70_000
    p = hub.fetch("org/model", "Q4_K_M")
    assert fake.cdn_ranges == [None, "bytes=70000-"]
    assert Path(p).read_bytes() == data


def test_concurrent_downloads_fetch_once(fake):
    out, errs = [None] * 4, []

    def run(i):
        try:
            out[i] = _hub.Hub().fetch("org/model", "Q4_K_M")
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs
    assert len(set(out)) == 1
    assert Path(out[0]).read_bytes() == fake.files["org/model"]["other-Q4_K_M.gguf"]
    assert len(fake.cdn_ranges) == 1, "one download; the others waited for its lock"


def test_download_refuses_a_corrupt_file(fake, tmp_path):
    fake.corrupt = True
    with pytest.raises(moonlm.HubError, match="sha256"):
        _hub.Hub().fetch("org/model", "Q4_K_M")
    blobs = tmp_path / "hf" / "hub" / "models--org--model" / "blobs"
    assert list(blobs.iterdir()) == []


def test_hub_errors_and_token(fake, monkeypatch):
    with pytest.raises(moonlm.HubError, match="HTTP 401.*restricted.*HF_TOKEN") as e:
        _hub.Hub().fetch("org/gated", "Q4_0")
    assert e.value.status == 401
    with pytest.raises(moonlm.HubError, match="HTTP 404"):
        _hub.Hub().fetch("org/model", "missing.gguf")
    with pytest.raises(moonlm.HubError, match="no .gguf file of org/model has 'IQ2'"):
        _hub.Hub().fetch("org/model", "IQ2")
    with pytest.raises(ValueError, match="org/name"):
        _hub.Hub().fetch("not-a-repo")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    p = _hub.Hub().fetch("org/gated", "q4_0")
    assert Path(p).read_bytes() == fake.files["org/gated"]["gated-Q4_0.gguf"]
    assert set(fake.cdn_auth) == {None}, "the token went to the CDN"


def test_offline_uses_the_cache(fake, monkeypatch):
    p = _hub.Hub().fetch("org/model", "Q8_0")
    fake.close()
    assert _hub.Hub().fetch("org/model", "Q8_0") == p  # unreachable: the cache serves
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _hub.Hub().fetch("org/model", "q8_0") == p
    assert _hub.Hub().fetch("org/model", "stories260K-Q8_0.gguf") == p
    with pytest.raises(moonlm.HubError, match="offline"):
        _hub.Hub().fetch("org/model", "Q4_K_M")
    fake.close = lambda: None  # already closed


def test_cache_location_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert _hub.cache_dir() == tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert _hub.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("HF_TOKEN", raising=False)
    (tmp_path / "token").write_text("hf_fromfile\n")
    assert _hub.Hub().token == "hf_fromfile"


def test_terminal_progress():
    now = [0.0]
    plain, tty = io.StringIO(), io.StringIO()
    for out, is_tty in ((plain, False), (tty, True)):
        now[0] = 0.0
        p = _hub.TerminalProgress(out, tty=is_tty, clock=lambda: now[0])
        p("m.gguf", 0, 100 << 20)
        for i in range(1, 11):
            now[0] = float(i)
            p("m.gguf", i * 10 << 20, 100 << 20)
    lines = plain.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in plain.getvalue()
    assert lines[1] == "m.gguf  50.0 MiB / 100.0 MiB   50%  10.0 MiB/s  ETA 0:05"
    assert lines[2] == "m.gguf  100.0 MiB / 100.0 MiB  100%  10.0 MiB/s  done in 0:10"
    assert tty.getvalue().count("\r\x1b[K") == 11 and tty.getvalue().count("\n") == 1
