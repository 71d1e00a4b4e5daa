#!/usr/bin/env python3
"""How soon an idle agent's command runs after an obligation arises (issue #35, "done when"),
through a leader kill: a three-node `kungfu dev up` cluster, `kungfu agent serve --profile alice --
<script>` waiting, and `lead` asking alice N times; each time, from the moment the post is
acknowledged to the moment the command starts (the script appends a wall-clock time to a file).
Half-way through, the leader is SIGKILLed; the asks after it are counted apart.

Usage: runner_latency.py KUNGFU_DIR [--asks 20]   (KUNGFU_DIR holds release `kungfu` and `kungfud`)
Prints one JSON object: the latencies in ms before and after the kill, and their summaries.
Everything lives in a temporary directory that is removed at the end.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_base() -> int:
    for base in range(21000, 60000, 317):
        ports = [base + i + off for i in range(3) for off in (0, 100, 200)]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise SystemExit("no free block of ports")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--asks", type=int, default=20)
    args = ap.parse_args()
    kungfu = os.path.join(args.bin_dir, "kungfu")
    kungfud = os.path.join(args.bin_dir, "kungfud")
    work = tempfile.mkdtemp(prefix="kungfu-runner-latency-")
    env = {**os.environ, "HOME": work, "XDG_CONFIG_HOME": os.path.join(work, "xdg"), "NO_COLOR": "1"}
    cluster = os.path.join(work, "cluster")
    runs = os.path.join(work, "runs")
    script = os.path.join(work, "agent.sh")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\npython3 -c "import time; print(time.time())" >> {runs}\ncat > /dev/null\n')
    os.chmod(script, 0o755)
    base = free_base()
    endpoints = ",".join(f"127.0.0.1:{base + i}" for i in range(3))

    def k(*a: str, check: bool = True) -> dict:
        out = subprocess.run([kungfu, "--json", *a], env=env, capture_output=True, text=True, timeout=120)
        if check and out.returncode != 0:
            raise SystemExit(f"kungfu {a}: {out.stdout}{out.stderr}")
        return json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}

    def leader() -> int | None:
        s = k("--profile", "dev", "cluster", "status", check=False)
        ls = [n["node_id"] for n in s.get("nodes", []) if n.get("role") == "leader"]
        return ls[0] if len(ls) == 1 else None

    serve = None
    try:
        subprocess.run(
            [kungfu, "dev", "up", "--dir", cluster, "--base-port", str(base), "--kungfud", kungfud],
            env=env, check=True, capture_output=True, timeout=120,
        )
        k("--profile", "lead", "register", "--endpoint", endpoints)
        alice = k("--profile", "alice", "register", "--endpoint", endpoints)["agent"]
        created = k("--profile", "lead", "thread", "create", "--text", "work", "--grant", "speaker")
        th = created["receipt"]["result"]["thread_created"]["thread"]
        k("--profile", "alice", "thread", "join", created["grant_secret"])
        log = open(os.path.join(work, "serve.log"), "w")
        serve = subprocess.Popen(
            [kungfu, "agent", "serve", "--profile", "alice", "--", script],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )
        time.sleep(2)
        before, after = [], []
        for i in range(args.asks):
            if i == args.asks // 2:
                l = leader()
                pid = int(open(os.path.join(cluster, f"node{l}.pid")).read().strip())
                os.kill(pid, signal.SIGKILL)
                deadline = time.time() + 30
                while time.time() < deadline and leader() in (None, l):
                    time.sleep(0.1)
            seen = len(open(runs).read().split()) if os.path.exists(runs) else 0
            k("--profile", "lead", "thread", "post", th, "--text", f"ask {i}", "--ask", alice)
            acked = time.time()
            deadline = acked + 30
            while time.time() < deadline:
                lines = open(runs).read().split() if os.path.exists(runs) else []
                if len(lines) > seen:
                    started = float(lines[seen])
                    (before if i < args.asks // 2 else after).append(round(1000 * (started - acked), 1))
                    break
                time.sleep(0.005)
            else:
                (before if i < args.asks // 2 else after).append(None)
            # The run is over (the script is short); the next ask is a new obligation.
            time.sleep(0.3)

        def summary(v):
            ok = sorted(x for x in v if x is not None)
            if not ok:
                return None
            return {"n": len(v), "missed": len(v) - len(ok), "p50_ms": ok[len(ok) // 2], "max_ms": ok[-1]}

        print(json.dumps({"before_kill": before, "after_kill": after, "summary_before": summary(before),
                          "summary_after": summary(after)}))
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=20)
            except subprocess.TimeoutExpired:
                serve.kill()
        subprocess.run([kungfu, "dev", "down", "--dir", cluster, "--purge"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
