"""Wake webhooks (issue #35, docs/wake.md) checked with an implementation nobody here wrote: the
PyPI `standardwebhooks` library verifies every delivery's signature, against the secret the MCP
tool `wake_target_set` returned once. The agent sets its target over MCP; a receiver on loopback
(the test cluster allows http and private destinations) answers 500 first, so the retry's id and
body are checked to be the first attempt's; the next turn change is the next sequence number under
a new id; and a wrong secret does not verify.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from kungfu_cluster import BOUND_S, Cluster
from test_mcp import connect, register

REVISION = "2026-07-28"
WAKE = '[wake]\nschemes = ["http"]\nallow_private = true\ncoalesce_ms = 50\n'


class Receiver:
    """Records every POST (headers, raw body) and answers with its script's statuses, then 200."""

    def __init__(self, script: list[int]):
        self.got: list[tuple[dict[str, str], bytes, int]] = []
        self.script = list(script)
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with outer.lock:
                    status = outer.script.pop(0) if outer.script else 200
                    outer.got.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def delivered(self, sequence: int) -> list[tuple[dict[str, str], bytes, int]]:
        """Every request so far, once one answered 200 carries `sequence` (bounded wait)."""
        deadline = time.monotonic() + BOUND_S
        while time.monotonic() < deadline:
            with self.lock:
                got = list(self.got)
            if any(status == 200 and json.loads(body)["sequence"] == sequence for _, body, status in got):
                return got
            time.sleep(0.05)
        raise AssertionError(f"delivery {sequence} never arrived: {got}")

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def cluster():
    c = Cluster.start(1, WAKE)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_every_delivery_verifies_with_the_standard_webhooks_library(cluster: Cluster) -> None:
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    lead_id, lead_key = await register(url, REVISION)
    worker_id, worker_key = await register(url, REVISION)
    rx = Receiver([500])
    try:
        async with connect(url, REVISION, lead_key) as lead, connect(url, REVISION, worker_key) as worker:
            set_ = await worker.call("wake_target_set", url=rx.url)
            secret = set_["secret"]
            target = set_["receipt"]["wake_target_set"]["target"]
            assert secret.startswith("whsec_") and target.startswith("wt_"), set_
            listed = await worker.call("wake_targets_get")
            assert secret not in json.dumps(listed), "a read never shows the secret"

            created = await lead.call("thread_create", subject="wake", grant={"role": "ROLE_SPEAKER"})
            thread = created["receipt"]["thread_created"]["thread"]
            await worker.call("thread_join", grant_secret=created["grant_secret"])
            posted = await lead.call(
                "thread_post", thread=thread, body={"content": "Secret plans."}, ask={"agents": [worker_id]}
            )
            entry = posted["receipt"]["posted"]["entry"]

            got = rx.delivered(1)
            wh = Webhook(secret)
            bodies = []
            for headers, body, _ in got:
                # The library checks the signature, and that the timestamp is recent.
                bodies.append(wh.verify(body, headers))
            assert len(got) >= 2, f"the 500 was retried: {got}"
            assert len({h["webhook-id"] for h, _, _ in got}) == 1, "a retry carries the first attempt's id"
            assert all(b == bodies[0] for b in bodies), "and its body"
            first = bodies[0]
            assert first["agent"] == worker_id and first["target"] == target and first["sequence"] == 1, first
            assert "Secret plans" not in json.dumps(first), "§12: a wake body carries no content"

            # A wrong secret does not verify.
            wrong = Webhook("whsec_" + base64.b64encode(b"\x01" * 32).decode())
            with pytest.raises(WebhookVerificationError):
                wrong.verify(got[-1][1], got[-1][0])

            await worker.call("thread_handle", thread=thread, entry=entry)
            got = rx.delivered(2)
            second = [(h, b) for h, b, s in got if json.loads(b)["sequence"] == 2]
            for headers, body in second:
                assert wh.verify(body, headers)["sequence"] == 2
            assert second[0][0]["webhook-id"] != got[0][0]["webhook-id"], "a new change, a new id"
    finally:
        rx.close()
