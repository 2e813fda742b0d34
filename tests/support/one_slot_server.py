"""An OpenAI-compatible chat server that serves ONE request at a time (like llama.cpp with
one slot), for tests of what a client does with an attempt it abandons.

Each request "generates" for ``work_s`` seconds while watching its socket: when the client
closes the connection the work stops at once and the request is counted as ``abandoned``
(a real server that does not notice would keep the slot busy and queue every retry behind
it). Connections are accepted and handled strictly one after another.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from types import TracebackType


class OneSlotServer:
    def __init__(self, work_s: float = 2.0) -> None:
        self.work_s = work_s
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.abandoned = 0
        self.served = 0
        self.busy_s = 0.0  # time spent generating, in total
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _loop(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            body += conn.recv(65536)
        started = time.monotonic()
        while time.monotonic() - started < self.work_s:
            readable, _, _ = select.select([conn], [], [], 0.02)
            if readable and conn.recv(1, socket.MSG_PEEK) == b"":
                self.abandoned += 1
                self.busy_s += time.monotonic() - started
                return
        self.busy_s += time.monotonic() - started
        payload = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "slow",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        ).encode()
        try:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            self.served += 1
        except OSError:
            self.abandoned += 1

    def __enter__(self) -> OneSlotServer:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()
