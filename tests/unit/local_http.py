"""A throwaway HTTP server on 127.0.0.1 for the tests of clients (the remote backend, endpoints, health checks)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], port: int = 0) -> Iterator[str]:
    """Serve ``handler`` on ``port`` (0: any free one) while the block runs; yields the OpenAI base URL (``/v1``)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def answer(handler: BaseHTTPRequestHandler, text: str, kind: str = "application/json", status: int = 200) -> None:
    """Send ``text`` as the whole answer to the request ``handler`` is serving."""
    data = text.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
