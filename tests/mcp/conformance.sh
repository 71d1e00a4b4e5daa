#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, npm) in server mode
# against one node's MCP URL, once per protocol revision: 2025-11-25 (initialize and sessions) and
# 2026-07-28 (stateless). Each run is the revision's requirement set (`--requirements`: every
# scenario the revision requires, at its wire version, plus the ones it runs without scoring).
#
# conformance-baseline.json names, per revision, the scenarios (or single `scenario:check`s) that
# Kungfu does not pass, each with its reason: they drive the SDK fixture servers' own tools,
# prompts and resources. Everything else must pass. Two judges, both must agree:
#   - the suite itself, given the baseline as its --expected-failures YAML (a failure or warning
#     outside it fails the run, and so does a baselined scenario that passes);
#   - conformance_check.py over the suite's per-check results, which applies the same rules to every
#     scenario that ran, scored or not, and prints the baselined ones with their reasons.
#
# Usage: tests/mcp/conformance.sh URL   (e.g. http://127.0.0.1:7600/mcp; run-all.sh starts a node)
# Needs npm/npx and python3; Node 22 comes from the registry (`npx -p node@22`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
url="${1:?usage: $0 URL}"
# Pinned: the 0.2 line is the first with the 2026-07-28 revision's scenarios and requirement sets.
suite="@modelcontextprotocol/conformance@0.2.0-alpha.12"
export npm_config_cache="${npm_config_cache:-$HOME/.cache/kungfu-mcp-npm}"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
out="$(mktemp -d -t kungfu-mcp-conformance.XXXXXX)"
trap 'rm -rf "$out"' EXIT
status=0
for revision in 2025-11-25 2026-07-28; do
  python3 "$here/conformance_check.py" yaml "$here/conformance-baseline.json" "$revision" >"$out/baseline-$revision.yml"
  echo "--- conformance $revision ($suite, --requirements $revision) ---"
  suite_status=0
  npx -y -p node@22 -p "$suite" -- conformance server --url "$url" --requirements "$revision" \
    --expected-failures "$out/baseline-$revision.yml" -o "$out/results-$revision" \
    >"$out/run-$revision.log" 2>&1 || suite_status=$?
  if ! python3 "$here/conformance_check.py" check "$here/conformance-baseline.json" "$revision" "$out/results-$revision"; then
    status=1
  fi
  if [ "$suite_status" -ne 0 ]; then
    echo "conformance $revision: the suite exited $suite_status; its report:" >&2
    sed -n '/=== SUMMARY ===/,$p' "$out/run-$revision.log" >&2
    [ -s "$out/run-$revision.log" ] && grep -q "=== SUMMARY ===" "$out/run-$revision.log" \
      || grep -v "^npm warn" "$out/run-$revision.log" | tail -n 40 >&2
    status=1
  fi
done
exit $status
