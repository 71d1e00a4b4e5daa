#!/usr/bin/env bash
# The MCP door tested with clients nobody here wrote, against real kungfud processes:
#   1. the Python `mcp` SDK (PyPI, pinned in requirements.txt) in both protocol revisions
#      (pytest, test_mcp.py: three-node clusters, a follower, a killed leader);
#   2. the official conformance suite @modelcontextprotocol/conformance in server mode, both
#      revisions, against one node, with the baseline conformance-baseline.json (conformance.sh);
#   3. the MCP Inspector CLI listing the tools and calling two (inspector.sh).
#
# Usage: tests/mcp/run-all.sh KUNGFUD KUNGFU   (the built binaries; .ci/run passes the debug ones)
# Needs python3 (venv, pip) and npm/npx; the packages come from PyPI and npm into caches under
# $HOME/.cache (KUNGFU_MCP_VENV, npm_config_cache override them). Every step that fails stops the
# run with a non-zero status and says which step and why.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ne 2 ]; then
  echo "usage: $0 KUNGFUD KUNGFU" >&2
  exit 2
fi
KUNGFUD="$(realpath "$1")" KUNGFU="$(realpath "$2")"
export KUNGFUD KUNGFU
for b in "$KUNGFUD" "$KUNGFU"; do
  [ -x "$b" ] || { echo "run-all.sh: $b is not an executable: build the workspace first" >&2; exit 2; }
done
export npm_config_cache="${npm_config_cache:-$HOME/.cache/kungfu-mcp-npm}"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
venv="${KUNGFU_MCP_VENV:-$HOME/.cache/kungfu-mcp-venv}"

step() { echo; echo "=== mcp: $* ==="; }
failed() { echo "=== mcp: FAILED: $* ===" >&2; exit 1; }
started=$SECONDS

step "Python clients (venv $venv)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || failed "python3 -m venv $venv (Debian: apt-get install python3-venv)"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" -c "$here/constraints.txt" \
  || failed "pip install -r tests/mcp/requirements.txt"

step "Python SDK (mcp $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')) against three-node clusters, both revisions"
t=$SECONDS
# -p no:cacheprovider: nothing written into the work tree.
"$venv/bin/python" -m pytest -p no:cacheprovider -q -ra "$here" || failed "Python SDK tests (tests/mcp/test_mcp.py)"
echo "python: $((SECONDS - t)) s"

# One single-node cluster for the conformance suite and the Inspector.
work="$(mktemp -d -t kungfu-mcp-node.XXXXXX)"
node_pid=""
cleanup() {
  if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
    kill -TERM "$node_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$node_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
read -r api raft http < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
url="http://127.0.0.1:$http/mcp"
step "one node for the conformance suite and the Inspector: $url"
KUNGFU_LOG=info "$KUNGFUD" --data-dir "$work/data" --cluster-id mcp-conformance \
  --api-listen "127.0.0.1:$api" --raft-listen "127.0.0.1:$raft" --http-listen "127.0.0.1:$http" \
  >"$work/node.log" 2>&1 &
node_pid=$!
for i in $(seq 1 600); do
  grep -q "MCP at $url" "$work/node.log" 2>/dev/null && break
  kill -0 "$node_pid" 2>/dev/null || { cat "$work/node.log" >&2; failed "kungfud exited at start"; }
  [ "$i" -lt 600 ] || { cat "$work/node.log" >&2; failed "kungfud did not log 'MCP at $url' within 60 s"; }
  sleep 0.1
done
# Registration answers once the node leads: wait for that, so the first scenario is not an election.
for i in $(seq 1 300); do
  "$KUNGFU" --endpoint "127.0.0.1:$api" --json --retries 0 --timeout-secs 2 register --no-save >/dev/null 2>&1 && break
  [ "$i" -lt 300 ] || { cat "$work/node.log" >&2; failed "the node never accepted a registration"; }
  sleep 0.2
done

step "conformance suite, both revisions"
t=$SECONDS
"$here/conformance.sh" "$url" || { tail -n 50 "$work/node.log" >&2; failed "conformance (tests/mcp/conformance.sh)"; }
echo "conformance: $((SECONDS - t)) s"

step "MCP Inspector CLI"
t=$SECONDS
"$here/inspector.sh" "$url" || { tail -n 50 "$work/node.log" >&2; failed "Inspector CLI (tests/mcp/inspector.sh)"; }
echo "inspector: $((SECONDS - t)) s"

echo
echo "=== mcp: every client passed in $((SECONDS - started)) s ==="
