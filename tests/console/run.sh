#!/usr/bin/env bash
# The web console (/ui/) tested in a real browser, against real kungfud processes: Debian's
# `chromium` driven by the npm package `playwright-core` (no browser download), under node's own
# test runner (`node --test tests/console/console.test.mjs`). A three-node cluster from
# `kungfu dev up`: the page shows three nodes and one leader, then a new leader after the old one
# is killed; an agent's page shows its owed response, and shows it gone, without a reload and
# without a poll (the watch feed's stream), once the reply is posted with the CLI; the thread,
# mailbox, Task, collective and shared-record views (a record patched with the CLI shows live, from
# the record's stream); participant content that is an HTML/script payload shows as text and runs
# nothing.
#
# Usage: tests/console/run.sh KUNGFUD KUNGFU   (the built binaries; .ci/run passes the debug ones)
# Needs chromium (Debian package `chromium`; CHROMIUM overrides the path) and node/npm. The npm
# package goes into $HOME/.cache/kungfu-console-npm (KUNGFU_CONSOLE_NPM overrides it); screenshots
# are kept in $HOME/.cache/kungfu-console-shots (KUNGFU_CONSOLE_SHOTS overrides it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ne 2 ]; then
  echo "usage: $0 KUNGFUD KUNGFU" >&2
  exit 2
fi
KUNGFUD="$(realpath "$1")" KUNGFU="$(realpath "$2")"
for b in "$KUNGFUD" "$KUNGFU"; do
  [ -x "$b" ] || { echo "console/run.sh: $b is not an executable: build the workspace first" >&2; exit 2; }
done
failed() { echo "=== console: FAILED: $* ===" >&2; exit 1; }

CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
[ -n "$CHROMIUM" ] && [ -x "$CHROMIUM" ] || failed "no chromium (Debian: apt-get install chromium; or set CHROMIUM)"
command -v node >/dev/null 2>&1 || failed "no node (Debian: apt-get install nodejs npm)"

# The one npm package, pinned, installed once into a cache outside the work tree.
PLAYWRIGHT_VERSION=1.65.1
npm_dir="${KUNGFU_CONSOLE_NPM:-$HOME/.cache/kungfu-console-npm}"
export npm_config_cache="${npm_config_cache:-$HOME/.cache/kungfu-mcp-npm}"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
installed="$(node -e 'try { console.log(require(process.argv[1] + "/node_modules/playwright-core/package.json").version) } catch (_) {}' "$npm_dir")"
if [ "$installed" != "$PLAYWRIGHT_VERSION" ]; then
  echo "=== console: installing playwright-core@$PLAYWRIGHT_VERSION into $npm_dir ==="
  mkdir -p "$npm_dir"
  npm install --silent --prefix "$npm_dir" --no-save "playwright-core@$PLAYWRIGHT_VERSION" \
    || failed "npm install playwright-core@$PLAYWRIGHT_VERSION"
fi

shots="${KUNGFU_CONSOLE_SHOTS:-$HOME/.cache/kungfu-console-shots}"
mkdir -p "$shots"
work="$(mktemp -d -t kungfu-console.XXXXXX)"
cleanup() {
  # Stops the cluster the test started, if it is still up (the test stops it itself when it can).
  if [ -d "$work/dev" ]; then
    XDG_CONFIG_HOME="$work/config" "$KUNGFU" dev down --dir "$work/dev" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "=== console: browser tests (chromium $("$CHROMIUM" --version 2>/dev/null | awk '{print $2}'), playwright-core $PLAYWRIGHT_VERSION) ==="
started=$SECONDS
KUNGFUD="$KUNGFUD" KUNGFU="$KUNGFU" CHROMIUM="$CHROMIUM" PLAYWRIGHT_DIR="$npm_dir" \
  KUNGFU_CONSOLE_SHOTS="$shots" KUNGFU_CONSOLE_WORK="$work" \
  node --test --test-concurrency=1 "$here/console.test.mjs" || failed "browser tests (tests/console/console.test.mjs)"
echo "=== console: passed in $((SECONDS - started)) s; screenshots in $shots ==="
