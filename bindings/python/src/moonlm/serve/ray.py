"""A Ray Serve deployment of `moonlm serve`: each replica runs one
`moonlm serve` process on a loopback port of its node and forwards the
OpenAI routes to it (streams included), so many machines serve one model
behind Ray Serve's HTTP proxy.

Start it with one command (the CLI `moonlm` on PATH, or MOONLM_CLI):

    serve run moonlm.serve.ray:build_app model=/path/model.gguf replicas=2

or from Python: ``serve.run(moonlm.serve.ray.app("/path/model.gguf"))``.
``build_app`` takes (as strings) model, replicas (a count, or "auto" to
autoscale between min_replicas and max_replicas on the requests each
replica has in flight, target_ongoing_requests by default --parallel),
parallel, ctx, alias, api_key, chat_template, threads and cli.

A replica whose server stops answering /health fails Ray's health check
and is replaced; a request that was on a replica that died fails with a 5xx
from the proxy, which the openai clients retry (on another replica).
"""

import ctypes
import http.client
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from ray import serve
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


def _cli_path(cli=None):
    path = cli or os.environ.get("MOONLM_CLI") or shutil.which("moonlm")
    if not path or not os.path.isfile(path):
        raise RuntimeError("moonlm.serve.ray: the moonlm CLI was not found: put it on PATH, set MOONLM_CLI, or pass cli=")
    return path


def _die_with_parent():
    # The server goes when its replica goes, however the replica ends.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class MoonlmReplica:
    """One `moonlm serve` process and a proxy to it."""

    def __init__(self, model, parallel=1, ctx=4096, alias=None, api_key=None, chat_template=None,
                 threads=0, cli=None, extra_args=(), ready_timeout=300.0):
        args = [_cli_path(cli), "serve", "-m", str(model), "--host", "127.0.0.1", "--port", "0",
                "--parallel", str(int(parallel)), "--ctx", str(int(ctx)), "-t", str(int(threads)),
                "--alias", alias or os.path.basename(str(model))]
        if api_key:
            args += ["--api-key", api_key]
        if chat_template:
            args += ["--chat-template", chat_template]
        args += list(extra_args)
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self._log = []
        self.url = None
        while self.url is None:
            line = self._proc.stderr.readline()
            if not line:
                self._proc.wait()
                raise RuntimeError("moonlm serve exited: " + "".join(self._log))
            self._log.append(line)
            m = re.search(r"listening on http://(\S+)", line)
            if m:
                self.url = "http://" + m.group(1)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + ready_timeout
        while not self._healthy():
            if self._proc.poll() is not None:
                raise RuntimeError("moonlm serve exited: " + "".join(self._log[-20:]))
            if time.time() > deadline:
                raise RuntimeError(f"moonlm serve was not ready in {ready_timeout} s")
            time.sleep(0.05)
        self._host, port = self.url[len("http://"):].rsplit(":", 1)
        self._port = int(port)

    def _drain_stderr(self):
        for line in self._proc.stderr:
            self._log.append(line)
            del self._log[:-200]

    def _healthy(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def check_health(self):
        """Ray Serve's health check: the server runs and is ready."""
        if self._proc.poll() is not None:
            raise RuntimeError(f"moonlm serve exited with {self._proc.returncode}")
        if not self._healthy():
            raise RuntimeError("moonlm serve is not ready")

    def pid(self):
        """The server process's id (for tests and operators)."""
        return self._proc.pid

    async def __call__(self, request: Request):
        body = await request.body()
        path = request.url.path
        if request.url.query:
            path += "?" + request.url.query
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        conn = http.client.HTTPConnection(self._host, self._port, timeout=3600)
        try:
            conn.request(request.method, path, body=body, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            return Response(b'{"error":{"message":"the replica\'s server is unreachable: %s","type":"server_error",'
                            b'"param":null,"code":"replica_unavailable"}}' % str(e).encode(),
                            status_code=503, media_type="application/json")
        out_headers = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP_HEADERS}
        if resp.getheader("Content-Type", "").startswith("text/event-stream"):
            def stream():
                try:
                    while True:
                        chunk = resp.read1(65536)
                        if not chunk:
                            break
                        yield chunk
                finally:
                    conn.close()
            return StreamingResponse(stream(), status_code=resp.status, headers=out_headers)
        data = resp.read()
        conn.close()
        return Response(data, status_code=resp.status, headers=out_headers)

    def __del__(self):
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()  # SIGTERM: drains the requests in flight
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


MoonlmDeployment = serve.deployment(MoonlmReplica, name="moonlm", health_check_period_s=2,
                                    health_check_timeout_s=10, graceful_shutdown_timeout_s=60)


def app(model, replicas=1, parallel=1, autoscale=None, **kwargs):
    """The Ray Serve application: replicas copies of the server, or with
    autoscale={"min_replicas": .., "max_replicas": ..} Ray's autoscaling on
    the requests each replica has in flight (target: parallel). Keyword
    arguments go to MoonlmReplica."""
    opts = {"max_ongoing_requests": max(4 * int(parallel), 16)}
    if autoscale is not None:
        cfg = {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": int(parallel)}
        cfg.update(autoscale)
        opts["autoscaling_config"] = cfg
    else:
        opts["num_replicas"] = int(replicas)
    return MoonlmDeployment.options(**opts).bind(model, parallel=parallel, **kwargs)


def build_app(args):
    """The builder `serve run moonlm.serve.ray:build_app model=...` calls."""
    args = dict(args)
    model = args.pop("model", None)
    if not model:
        raise ValueError("moonlm.serve.ray: give model=/path/model.gguf")
    replicas = args.pop("replicas", "1")
    kw = {}
    for k in ("parallel", "ctx", "threads"):
        if k in args:
            kw[k] = int(args.pop(k))
    for k in ("alias", "api_key", "chat_template", "cli"):
        if k in args:
            kw[k] = args.pop(k)
    autoscale = None
    if replicas == "auto":
        autoscale = {k: int(args.pop(k)) for k in ("min_replicas", "max_replicas", "target_ongoing_requests") if k in args}
    if args:
        raise ValueError(f"moonlm.serve.ray: unknown arguments {sorted(args)}")
    return app(model, replicas=1 if replicas == "auto" else int(replicas), autoscale=autoscale, **kw)
