"""Real `kungfud` processes for the MCP tests: the Python twin of `tests/src/lib.rs`.

A cluster is written as one TOML file per node in the shape of `cluster-config/three/` (free
loopback ports for the API, raft and the HTTP listener that serves MCP at `/mcp`), started from the
built binary, and removed with its data when the test ends. The leader is found with the operator
call `ClusterStatus` through the `kungfu` CLI. Every wait is a bounded poll: a failure, never a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: Every wait gives up after this long.
BOUND_S = 60.0

#: The operator token of test clusters (the leader is found with `ClusterStatus`).
OPERATOR_TOKEN = "mcp-tests-operator-token"

#: The `[raft]` settings of test clusters: fast heartbeats and elections (as `TEST_RAFT` in Rust).
TEST_RAFT = "heartbeat_ms = 50\nelection_timeout_min_ms = 300\nelection_timeout_max_ms = 600"


def binary(env: str, name: str) -> Path:
    """A built binary named by an environment variable (set by run-all.sh)."""
    value = os.environ.get(env)
    if not value:
        raise RuntimeError(f"set {env} to the path of the built `{name}` binary (tests/mcp/run-all.sh does)")
    path = Path(value)
    if not path.is_file():
        raise RuntimeError(f"{env}={path}: no such file; build the workspace first")
    return path


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports (held together while picked, released for the nodes)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Node:
    id: int
    api: int
    raft: int
    http: int
    config: Path
    proc: subprocess.Popen | None = None

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.http}/mcp"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.api}"

    @property
    def log_path(self) -> Path:
        return self.config.with_suffix(".log")

    def start(self, kungfud: Path) -> None:
        assert self.proc is None, f"node {self.id} already runs"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(kungfud), "--config", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUNGFU_LOG": "info"},
        )
        log.close()

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, as a crash."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=BOUND_S)
            self.proc = None

    def terminate(self) -> int | None:
        """SIGTERM and wait; the exit status, or None if it had to be killed."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            status = None
        self.proc = None
        return status

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class Cluster:
    """A cluster of `kungfud` processes in a temporary directory."""

    kungfud: Path
    kungfu: Path
    nodes: dict[int, Node] = field(default_factory=dict)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kungfu-mcp-")))

    @classmethod
    def start(cls, n: int, extra: str = "") -> "Cluster":
        c = cls(kungfud=binary("KUNGFUD", "kungfud"), kungfu=binary("KUNGFU", "kungfu"))
        ports = free_ports(3 * n)
        nodes = [Node(i, *ports[3 * (i - 1) : 3 * i], config=c.dir / f"node{i}.toml") for i in range(1, n + 1)]
        peers = ""
        if n > 1:
            for node in nodes:
                peers += f'\n[[peers]]\nid = {node.id}\nraft = "127.0.0.1:{node.raft}"\napi = "127.0.0.1:{node.api}"\n'
        for node in nodes:
            node.config.write_text(
                f"node_id = {node.id}\n"
                'cluster_id = "mcp-test"\n'
                f'data_dir = "{c.dir / f"data{node.id}"}"\n'
                f'api_listen = "127.0.0.1:{node.api}"\n'
                f'raft_listen = "127.0.0.1:{node.raft}"\n'
                f'http_listen = "127.0.0.1:{node.http}"\n'
                "bootstrap = true\n"
                f'operator_token = "{OPERATOR_TOKEN}"\n'
                f"{extra}\n\n[raft]\n{TEST_RAFT}\n{peers}"
            )
            c.nodes[node.id] = node
        try:
            for node in nodes:
                node.start(c.kungfud)
            c.wait_for_leader()
            for node in nodes:
                c.wait_for_mcp(node)
        except BaseException:
            c.stop()
            raise
        return c

    def logs(self) -> str:
        return "".join(f"--- node {n.id} ---\n{n.log()[-4000:]}\n" for n in self.nodes.values())

    def status(self, node: Node) -> dict | None:
        """`ClusterStatus` of one node through the CLI, or None if it does not answer."""
        out = subprocess.run(
            [
                str(self.kungfu),
                "--endpoint",
                node.endpoint,
                "--key",
                OPERATOR_TOKEN,
                "--json",
                "--retries",
                "0",
                "--timeout-secs",
                "2",
                "cluster",
                "status",
            ],
            capture_output=True,
            text=True,
            timeout=BOUND_S,
            env={**os.environ, "HOME": str(self.dir), "XDG_CONFIG_HOME": str(self.dir / "xdg")},
        )
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except json.JSONDecodeError:
            return None

    def leader(self) -> int | None:
        """The id of the node that says it leads, among the running ones."""
        for node in self.nodes.values():
            if node.proc is None:
                continue
            s = self.status(node)
            if s is None:
                continue
            me = next((row for row in s["nodes"] if row["node_id"] == s["answered_by"]), None)
            if me is not None and str(me.get("role", "")).lower() == "leader":
                return node.id
        return None

    def wait_for_leader(self, other_than: int | None = None) -> int:
        start = time.monotonic()
        while True:
            leader = self.leader()
            if leader is not None and leader != other_than:
                return leader
            for node in self.nodes.values():
                if node.proc is not None and node.proc.poll() is not None:
                    raise AssertionError(f"node {node.id} exited ({node.proc.returncode})\n{self.logs()}")
            if time.monotonic() - start > BOUND_S:
                raise AssertionError(f"no leader (other than {other_than}) within {BOUND_S}s\n{self.logs()}")
            time.sleep(0.2)

    def wait_for_mcp(self, node: Node) -> None:
        """Until the node's HTTP listener answers at all (any HTTP status counts)."""
        start = time.monotonic()
        while True:
            try:
                urllib.request.urlopen(urllib.request.Request(node.mcp_url, method="GET"), timeout=2)
                return
            except urllib.error.HTTPError:
                return
            except OSError as e:
                if time.monotonic() - start > BOUND_S:
                    raise AssertionError(f"{node.mcp_url} never answered: {e}\n{self.logs()}") from e
                time.sleep(0.1)

    def follower(self) -> Node:
        leader = self.wait_for_leader()
        return next(n for n in self.nodes.values() if n.id != leader and n.proc is not None)

    def stop(self) -> None:
        """Stops every process and removes the directory with the data."""
        for node in self.nodes.values():
            try:
                node.kill()
            except Exception:  # noqa: BLE001 -- cleanup goes on for the other nodes
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
