"""Judges a run of @modelcontextprotocol/conformance (server mode) against conformance-baseline.json.

    conformance_check.py yaml BASELINE REVISION          the baseline as the suite's --expected-failures YAML
    conformance_check.py check BASELINE REVISION RESULTS  judge RESULTS (the suite's -o directory)

A check that ends FAILURE or WARNING does not pass (the suite's own rule once a baseline is given).
A scenario passes when none of its checks fails. A failing check is excused by a baseline entry
naming its scenario, or `scenario:check`. The run fails on a failure nothing excuses, and on a stale
entry: a scenario entry whose scenario passed or did not run, or a check entry whose check passed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

NOT_PASSING = {"FAILURE", "WARNING", "ERROR"}


def baseline(path: str, revision: str) -> dict[str, str]:
    return json.loads(Path(path).read_text())["revisions"][revision]


def results(directory: str) -> dict[str, list[dict]]:
    """Scenario name to its checks, from `server-<scenario>-<timestamp>/checks.json`."""
    runs: dict[str, list[dict]] = {}
    for d in sorted(Path(directory).iterdir()):
        m = re.fullmatch(r"server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z", d.name)
        if m and (d / "checks.json").is_file():
            runs[m.group(1)] = json.loads((d / "checks.json").read_text())
    return runs


def check(base: dict[str, str], runs: dict[str, list[dict]], revision: str) -> bool:
    scenario_entries = {k for k in base if ":" not in k}
    check_entries = {k for k in base if ":" in k}
    unexpected, stale, excused, passed = [], [], [], []
    for scenario, checks in runs.items():
        failing = {c["id"]: c for c in checks if c.get("status") in NOT_PASSING}
        passing_ids = {c["id"] for c in checks if c.get("status") == "SUCCESS"}
        if scenario in scenario_entries:
            (excused if failing else stale).append(scenario)
            continue
        for cid, c in failing.items():
            key = f"{scenario}:{cid}"
            if key in check_entries:
                excused.append(key)
            else:
                unexpected.append(f"{key} {c['status']}: {(c.get('errorMessage') or '').strip()[:300]}")
        for key in check_entries:
            s, cid = key.split(":", 1)
            if s == scenario and cid in passing_ids and cid not in failing:
                stale.append(key)
        if not failing:
            passed.append(scenario)
    stale += [s for s in scenario_entries if s not in runs]
    stale += [k for k in check_entries if k.split(":", 1)[0] not in runs]
    print(f"conformance {revision}: {len(runs)} scenarios ran; {len(passed)} passed outright, "
          f"{len(excused)} baselined failure(s) excused:")
    for key in sorted(excused):
        print(f"  ~ {key}: {base[key]}")
    for s in sorted(passed):
        print(f"  ✓ {s}")
    if unexpected:
        print(f"conformance {revision}: FAILED, {len(unexpected)} failure(s) outside the baseline:", file=sys.stderr)
        for u in unexpected:
            print(f"  ✗ {u}", file=sys.stderr)
    if stale:
        print(f"conformance {revision}: FAILED, stale baseline entries (they pass now, or did not run): "
              f"remove them from conformance-baseline.json:", file=sys.stderr)
        for s in sorted(set(stale)):
            print(f"  ! {s}", file=sys.stderr)
    return not unexpected and not stale


def main() -> int:
    mode, path, revision = sys.argv[1:4]
    base = baseline(path, revision)
    if mode == "yaml":
        print("server:" if base else "server: []")
        for key in sorted(base):
            print(f"  - {key}")
        return 0
    if mode == "check":
        runs = results(sys.argv[4])
        if not runs:
            print(f"conformance {revision}: no scenario results in {sys.argv[4]}", file=sys.stderr)
            return 1
        return 0 if check(base, runs, revision) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
