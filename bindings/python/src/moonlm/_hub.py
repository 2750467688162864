"""Downloading GGUF files from the Hugging Face Hub (Model.from_pretrained).

Pure Python over urllib, not a call into libmoonlm: the library stays a
compute library that opens no sockets, and Python has all this needs
(urllib, hashlib) in its standard library. It follows the same rules as
`moonlm pull` (internal/hub) and the Hub's own tools: the cache layout
<cache>/models--ORG--NAME/{blobs/<etag>, snapshots/<commit>/FILE -> blob,
refs/<revision>} in HF_HUB_CACHE (else HF_HOME/hub, else
~/.cache/huggingface/hub), shared with them; resume from
blobs/<etag>.incomplete with HTTP Range; an LFS file's sha256 checked
against X-Linked-Etag; HF_TOKEN (else HF_HOME/token) sent to the Hub and
never to the CDN it redirects to; HF_ENDPOINT; HF_HUB_OFFLINE=1 or an
unreachable Hub uses the cache.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, List, Optional, Tuple

DEFAULT_ENDPOINT = "https://huggingface.co"
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_ETAG = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_MAX_FILE = 1 << 40  # the largest size the Hub may announce for a file
_MAX_LISTING = 16 << 20

Progress = Callable[[str, int, int], None]  # (file, done, total or -1)


class HubError(OSError):
    """The Hub refused or could not serve a file; .status is the HTTP status (0 if none)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


def _truthy(v: Optional[str]) -> bool:
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def _hf_home() -> Path:
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "huggingface"


def cache_dir() -> Path:
    """The Hub cache folder: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    d = os.environ.get("HF_HUB_CACHE")
    return Path(d) if d else _hf_home() / "hub"


def _token() -> Optional[str]:
    t = (os.environ.get("HF_TOKEN") or "").strip()
    if t:
        return t
    try:
        f = _hf_home() / "token"
        if f.stat().st_size < 4096:
            return f.read_text().strip() or None
    except OSError:
        pass
    return None


def _check_file(f: str) -> None:
    parts = f.split("/")
    if not f or len(f) > 1024 or f.startswith("/") or "\\" in f or "\0" in f or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"moonlm: {f!r} is not a file path in a repository")


def choose(repo: str, files: List[str], pattern: Optional[str]) -> str:
    """The GGUF file pattern names among files: the file itself; a glob
    (fnmatch, e.g. "*Q4_K_M.gguf"); a quantization name the file's name
    contains (any case, e.g. "q8_0"); with no pattern, the only GGUF file,
    else the Q4_K_M one. Anything ambiguous raises, listing the candidates."""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf"))
    if pattern and pattern in files:
        return pattern
    if pattern and any(c in pattern for c in "*?["):
        matches = [f for f in files if fnmatch.fnmatch(f, pattern)]
        if not matches:
            raise HubError(f"moonlm: no file of {repo} matches {pattern!r}; its GGUF files: {', '.join(ggufs)}", 404)
    elif pattern and (pattern.lower().endswith(".gguf") or "/" in pattern):
        raise HubError(f"moonlm: {repo} has no file {pattern}", 404)
    else:
        if not ggufs:
            raise HubError(f"moonlm: {repo} has no .gguf file", 404)
        quant = pattern or ("" if len(ggufs) == 1 else "Q4_K_M")
        matches = [f for f in ggufs if quant.lower() in f.rsplit("/", 1)[-1].lower()]
        if not matches:
            if pattern:
                raise HubError(f"moonlm: no .gguf file of {repo} has {pattern!r} in its name; it has: {', '.join(ggufs)}", 404)
            raise HubError(
                f"moonlm: {repo} has several .gguf files; pass filename= (a name, a glob or a quantization "
                f"like 'Q8_0'): {', '.join(ggufs)}",
                404,
            )
    if len(matches) > 1:
        raise HubError(f"moonlm: {len(matches)} files of {repo} match; name one: {', '.join(matches)}", 404)
    return matches[0]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as responses: the caller decides whether to follow
    (and whether the token goes along)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def _http_error(e: urllib.error.HTTPError, url: str) -> HubError:
    msg = (e.headers.get("X-Error-Message") or "").strip()[:300]
    hint = ""
    if e.code in (401, 403):
        hint = ": the repository is private or gated, or does not exist; set HF_TOKEN to a token that can read it"
    elif e.code == 404:
        hint = ": no such repository, file or revision"
    return HubError(f"moonlm: {url}: HTTP {e.code}{' (' + msg + ')' if msg else ''}{hint}", e.code)


class Hub:
    """One configuration: the endpoint, cache, token, revision and progress."""

    def __init__(
        self,
        *,
        endpoint: Optional[str] = None,
        cache: Optional[os.PathLike] = None,
        token: Optional[str] = None,
        revision: str = "main",
        offline: Optional[bool] = None,
        progress: Optional[Progress] = None,
        timeout: float = 60.0,
    ):
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        u = urllib.parse.urlsplit(self.endpoint)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"moonlm: endpoint {self.endpoint!r} is not an http(s) URL")
        self.host = u.netloc
        self.cache = Path(cache) if cache is not None else cache_dir()
        self.token = token if token is not None else _token()
        if not revision or ".." in revision or "\\" in revision or "\0" in revision or len(revision) > 256:
            raise ValueError(f"moonlm: {revision!r} is not a revision")
        self.revision = revision
        self.offline = _truthy(os.environ.get("HF_HUB_OFFLINE")) if offline is None else offline
        self.progress = progress
        self.timeout = timeout

    def _repo_dir(self, repo: str) -> Path:
        return self.cache / ("models--" + repo.replace("/", "--"))

    def _open(self, url: str, method: str = "GET", headers: Optional[dict] = None):
        req = urllib.request.Request(url, method=method, headers=dict(headers or {}))
        req.add_header("User-Agent", "moonlm")
        if self.token and urllib.parse.urlsplit(url).netloc == self.host:  # never to the CDN
            req.add_header("Authorization", "Bearer " + self.token)
        return _opener.open(req, timeout=self.timeout)

    # -- the API ----------------------------------------------------------

    def files(self, repo: str) -> List[str]:
        """The repository's files (GET /api/models/{repo}/revision/{revision})."""
        url = f"{self.endpoint}/api/models/{repo}/revision/{urllib.parse.quote(self.revision, safe='')}"
        try:
            with self._open(url) as r:
                body = r.read(_MAX_LISTING + 1)
        except urllib.error.HTTPError as e:
            raise _http_error(e, url) from None
        if len(body) > _MAX_LISTING:
            raise HubError(f"moonlm: listing {repo}: the answer is over {_MAX_LISTING} bytes")
        try:
            info = json.loads(body)
            return [str(s["rfilename"]) for s in info.get("siblings", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise HubError(f"moonlm: listing {repo}: {e}") from None

    def fetch(self, repo: str, pattern: Optional[str] = None) -> str:
        """The local path of the file of repo that pattern names (see choose),
        downloaded into the cache unless it is there."""
        if not _REPO.match(repo) or ".." in repo:
            raise ValueError(f"moonlm: {repo!r} is not a repository name of the form org/name")
        if self.offline:
            try:
                return self._cached(repo, pattern)
            except HubError as e:
                raise HubError(f"moonlm: offline (HF_HUB_OFFLINE): {e}", e.status) from None
        try:
            name = pattern if pattern and self._is_exact(pattern) else choose(repo, self.files(repo), pattern)
            return self.download(repo, name)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            if isinstance(e, urllib.error.HTTPError):
                raise
            try:  # the network failed, not the Hub saying no: the cache will do
                return self._cached(repo, pattern)
            except HubError:
                raise HubError(f"moonlm: cannot reach {self.endpoint}: {e}") from e

    @staticmethod
    def _is_exact(pattern: str) -> bool:
        return not any(c in pattern for c in "*?[") and (pattern.lower().endswith(".gguf") or "/" in pattern)

    def _cached(self, repo: str, pattern: Optional[str]) -> str:
        d = self._repo_dir(repo)
        commit = self.revision
        if not _COMMIT.match(commit):
            try:
                commit = (d / "refs" / commit).read_text().strip()
            except OSError:
                raise HubError(f"{repo} (revision {self.revision}) is not in the cache {self.cache}", 404) from None
            if not _COMMIT.match(commit):
                raise HubError(f"the cache's refs/{self.revision} of {repo} holds no commit")
        snap = d / "snapshots" / commit
        files = [p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file()] if snap.is_dir() else []
        if pattern and self._is_exact(pattern):
            if pattern not in files:
                raise HubError(f"{pattern} of {repo} is not in the cache {self.cache}", 404)
            return str(snap / pattern)
        try:
            return str(snap / choose(repo, files, pattern))
        except HubError as e:
            raise HubError(f"in the cache: {e}", 404) from None

    def _head(self, repo: str, file: str) -> Tuple[str, str, int, str]:
        """(commit, etag, size or -1, where the bytes are) from HEAD .../resolve/...,
        following redirects on the Hub's own host but not the one to the CDN."""
        url = "%s/%s/resolve/%s/%s" % (
            self.endpoint, repo, urllib.parse.quote(self.revision, safe=""), urllib.parse.quote(file),
        )
        for _ in range(6):
            try:
                with self._open(url, "HEAD") as r:
                    return self._meta(file, r.headers, r.headers.get("Content-Length"), url)
            except urllib.error.HTTPError as e:
                if 300 <= e.code < 400 and e.headers.get("Location"):
                    loc = urllib.parse.urljoin(url, e.headers["Location"])
                    if urllib.parse.urlsplit(loc).netloc == self.host:
                        url = loc
                        continue
                    return self._meta(file, e.headers, None, loc)
                raise _http_error(e, url) from None
        raise HubError(f"moonlm: {file}: too many redirects")

    @staticmethod
    def _meta(file, h, length, url) -> Tuple[str, str, int, str]:
        commit = h.get("X-Repo-Commit") or ""
        if not _COMMIT.match(commit):
            raise HubError(f"moonlm: {file}: the Hub's answer has no commit (X-Repo-Commit {commit[:80]!r})")
        raw = h.get("X-Linked-Etag") or h.get("ETag") or ""
        etag = raw[2:] if raw.startswith("W/") else raw
        etag = etag.strip('"')
        if not _ETAG.match(etag):
            raise HubError(f"moonlm: {file}: the Hub's answer has no usable ETag ({raw[:80]!r})")
        size_s = h.get("X-Linked-Size") or length
        size = -1
        if size_s is not None:
            try:
                size = int(size_s)
            except ValueError:
                raise HubError(f"moonlm: {file}: bad size {size_s[:40]!r}") from None
            if size < 0 or size > _MAX_FILE:
                raise HubError(f"moonlm: {file}: the Hub says it is {size} bytes, over the {_MAX_FILE} this accepts")
        return commit, etag, size, url

    def download(self, repo: str, file: str) -> str:
        """Fetches one file into the cache (unless its blob is there) and
        returns its path in the snapshot folder."""
        _check_file(file)
        commit, etag, size, url = self._head(repo, file)
        d = self._repo_dir(repo)
        blob = d / "blobs" / etag
        pointer = d / "snapshots" / commit / file
        def have_blob():
            return blob.is_file() and (size < 0 or blob.stat().st_size == size)

        if not have_blob():
            # The lock the Hub's own tools take: two downloads of one file,
            # ours or theirs, never write it at once.
            with _flock(self.cache / ".locks" / d.name / (etag + ".lock")):
                if not have_blob():  # another download may have finished it
                    self._download_blob(file, url, etag, size, blob)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(blob, pointer.parent)
        if not (pointer.is_symlink() and os.readlink(pointer) == rel):
            # A link under a name of this call's own, renamed over the
            # pointer: concurrent fetches of one file each replace it
            # atomically instead of racing to create it.
            tmp = pointer.with_name(f".{pointer.name}.{os.getpid()}.{threading.get_ident()}.link")
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()
            os.symlink(rel, tmp)
            os.replace(tmp, pointer)
        if self.revision != commit:
            ref = d / "refs" / self.revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(commit)
        return str(pointer)

    def _download_blob(self, file: str, url: str, etag: str, size: int, blob: Path) -> None:
        blob.parent.mkdir(parents=True, exist_ok=True)
        part = blob.with_name(blob.name + ".incomplete")
        lfs = len(etag) == 64 and all(c in "0123456789abcdef" for c in etag)  # its etag is its sha256
        with open(part, "a+b") as f:
            f.seek(0)
            have = 0
            h = hashlib.sha256() if lfs else None
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                have += len(chunk)
                if h is not None:
                    h.update(chunk)
            if size >= 0 and have > size:
                f.truncate(0)
                have, h = 0, hashlib.sha256() if lfs else None
            for attempt in range(2):
                try:
                    have, h = self._get(file, url, f, h, have, size, lfs)
                    break
                except _Restart:
                    if attempt:
                        raise HubError(f"moonlm: {file}: the server cannot resume the download") from None
                    f.truncate(0)
                    have, h = 0, hashlib.sha256() if lfs else None
        if size >= 0 and have != size:
            raise HubError(f"moonlm: {file}: got {have} bytes, the Hub said {size} (run again to resume)")
        if h is not None and h.hexdigest() != etag:
            part.unlink()
            raise HubError(
                f"moonlm: {file}: sha256 {h.hexdigest()} does not match the Hub's {etag}: "
                "the download is corrupt (removed; try again)"
            )
        os.replace(part, blob)

    def _get(self, file, url, f, h, have, size, lfs, hops=0):
        if size >= 0 and have == size:
            return have, h
        headers = {"Range": f"bytes={have}-"} if have > 0 else {}
        try:
            r = self._open(url, headers=headers)
        except urllib.error.HTTPError as e:
            if e.code == 416:
                raise _Restart() from None
            if 300 <= e.code < 400 and e.headers.get("Location") and hops < 5:  # the CDN moved it on
                return self._get(file, urllib.parse.urljoin(url, e.headers["Location"]), f, h, have, size, lfs, hops + 1)
            raise _http_error(e, url) from None
        with r:
            if have > 0 and r.status == 206:
                m = re.match(r"bytes (\d+)-", r.headers.get("Content-Range") or "")
                if not m or int(m.group(1)) != have:
                    raise _Restart()
            elif have > 0:  # the whole file again: start over
                f.truncate(0)
                have, h = 0, hashlib.sha256() if lfs else None
            f.seek(have)
            last = 0.0
            while True:
                try:
                    chunk = r.read(1 << 20)
                except OSError as e:
                    raise HubError(f"moonlm: downloading {file}: {e} (run again to resume)") from e
                if not chunk:
                    break
                if size >= 0 and have + len(chunk) > size:
                    raise HubError(f"moonlm: {file}: the server sent more than the {size} bytes the Hub said")
                f.write(chunk)
                if h is not None:
                    h.update(chunk)
                have += len(chunk)
                if self.progress and time.monotonic() - last >= 0.1:
                    self.progress(file, have, size)
                    last = time.monotonic()
        f.flush()
        if self.progress:
            self.progress(file, have, size)
        return have, h


@contextlib.contextmanager
def _flock(path: Path):
    """An exclusive flock on path while the block runs (none without fcntl)."""
    try:
        import fcntl
    except ImportError:  # not a Unix: downloads of one file are not coordinated
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class _Restart(Exception):
    """The server cannot continue a partial download."""


def _bytes(n: float) -> str:
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return ""


def _clock(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class TerminalProgress:
    """Progress on a stream: one line redrawn in place on a terminal (bytes,
    rate, ETA); plain lines every few seconds and at the end otherwise."""

    def __init__(self, stream=None, tty: Optional[bool] = None, clock=time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.file = None
        self.start = self.last = 0.0
        self.origin = 0

    def __call__(self, file: str, done: int, total: int) -> None:
        now = self.clock()
        if file != self.file:
            self.file, self.start, self.origin, self.last = file, now, done, None
        finished = total >= 0 and done >= total
        if not self.tty and not finished and self.last is not None and now - self.last < 5:
            return
        self.last = now
        elapsed = now - self.start
        rate = (done - self.origin) / elapsed if elapsed > 0 else 0.0
        line = f"{file}  {_bytes(done)}"
        if total >= 0:
            line += f" / {_bytes(total)}  {100 * done / total if total else 100:3.0f}%"
        line += f"  {_bytes(rate)}/s"
        if total >= 0 and done < total and rate > 0:
            line += "  ETA " + _clock((total - done) / rate)
        elif finished:
            line += "  done in " + _clock(elapsed)
        if self.tty:
            self.stream.write("\r\x1b[K" + line + ("\n" if finished else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
