#!/usr/bin/env bash
# The MCP Inspector's CLI (@modelcontextprotocol/inspector --cli, npm) against one node's MCP URL,
# in both protocol eras: it lists the tools (the agent's core ones must be there), registers an
# agent with `agent_register` (the one tool that needs no key), and reads that agent's turn with
# `turn_get`, its key in the `Authorization: Bearer` header.
#
# Usage: tests/mcp/inspector.sh URL
set -euo pipefail
url="${1:?usage: $0 URL}"
inspector="@modelcontextprotocol/inspector@2.12.0"
export npm_config_cache="${npm_config_cache:-$HOME/.cache/kungfu-mcp-npm}"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
work="$(mktemp -d -t kungfu-mcp-inspector.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The Inspector keeps a catalog of servers; keep it out of $HOME.
export MCP_CATALOG_PATH="$work/catalog.json"

cli() { npx -y -p node@22 -p "$inspector" -- mcp-inspector --cli "$url" --transport http "$@" 2>"$work/stderr"; }
fail() { echo "inspector: $*" >&2; grep -v EBADENGINE "$work/stderr" | grep -v "^npm warn" >&2 || true; exit 1; }

for era in legacy modern; do
  cli --protocol-era "$era" --method tools/list >"$work/tools.json" || fail "tools/list ($era) failed"
  python3 - "$work/tools.json" <<'PY' || fail "tools/list ($era) lacks a core tool"
import json, sys
names = {t["name"] for t in json.load(open(sys.argv[1]))["tools"]}
core = {"agent_register", "thread_create", "thread_join", "thread_post", "assignment_take",
        "assignment_deliver", "assignment_adopt", "turn_get", "turn_wait", "entry_get"}
missing = core - names
assert not missing, f"missing {sorted(missing)} among {len(names)} tools"
print(f"tools/list: {len(names)} tools, the core ones among them")
PY
  cli --protocol-era "$era" --method tools/call --tool-name agent_register >"$work/register.json" \
    || fail "tools/call agent_register ($era) failed"
  key="$(python3 - "$work/register.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert not r.get("isError"), r
print(r["structuredContent"]["agent_key"])
PY
)" || fail "agent_register ($era) returned no agent_key: $(cat "$work/register.json")"
  cli --protocol-era "$era" --method tools/call --tool-name turn_get --header "Authorization: Bearer $key" \
    >"$work/turn.json" || fail "tools/call turn_get ($era) failed"
  python3 - "$work/turn.json" <<'PY' || fail "turn_get ($era): $(cat "$work/turn.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert not r.get("isError"), r
print("turn_get:", json.dumps(r["structuredContent"])[:200])
PY
  echo "inspector $era: tools/list, agent_register, turn_get: ok"
done
