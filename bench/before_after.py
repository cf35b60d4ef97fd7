#!/usr/bin/env python3
"""Two brokerbench binaries side by side on one case: a change's cost and what it did to the numbers.

Runs `brokerbench run` with the same --set settings from each binary in turn (alternating which
goes first, each once the host is quiet), and prints per run and as medians: client CPU-s per
million acknowledged messages (the whole process, from wait4; per million sent when nothing is
acknowledged), schedule lag p99, publish latency p50/p99 and end-to-end latency p50/p99. A run
that exits with problems is shown and left out of the medians.

Usage: bench/before_after.py OLD_BINARY NEW_BINARY [--rounds 3] -- SETTING...
  e.g. bench/before_after.py /tmp/bb-old target/release/brokerbench --rounds 3 -- \\
           driver=nats rate=10000 warmup=0s duration=10s
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RunFailed, attempt, left_out, settle, succeeded, summary_problems, timed  # noqa: E402

FIGURES = ("cpu", "lag_p99", "publish_p50", "publish_p99", "e2e_p50", "e2e_p99")


def micros(latency, name, pct):
    h = latency.get(name) or {}
    return h.get(f"{pct}_ns", 0) / 1e3


def one_run(binary, settings):
    settle()
    with tempfile.TemporaryDirectory(prefix="bb-before-after-") as tmp:
        args = [binary, "run", "--quiet", "--no-monitor", "--out", os.path.join(tmp, "run")]
        for s in settings:
            args += ["--set", s]
        usage = timed(args, merge=False, allowed=(0, 1))
        try:
            s = json.load(open(os.path.join(tmp, "run", "summary.json")))
        except (OSError, ValueError):
            raise RunFailed(f"{binary} exited {usage.code} and wrote no readable summary.json")
    problems = summary_problems(s)
    if usage.code != 0 or problems:
        raise RunFailed(f"exited {usage.code}: {'; '.join(problems) or 'see its notes'}")
    messages = s["total"]["acknowledged"] or s["total"]["sent"]
    lat = s["latency"]
    return {"cpu": usage.cpu * 1e6 / messages,
            "lag_p99": micros(lat, "schedule_lag", "p99"),
            "publish_p50": micros(lat, "publish", "p50"), "publish_p99": micros(lat, "publish", "p99"),
            "e2e_p50": micros(lat, "end_to_end", "p50"), "e2e_p99": micros(lat, "end_to_end", "p99")}


def line(result):
    return ("  ".join(f"{k} {result[k]:,.1f}" for k in FIGURES)
            + "   (CPU-s per million messages; latencies in µs)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("settings", nargs="+", help="--set settings of the run, e.g. driver=nats rate=10000")
    args = parser.parse_args()
    results = {"old": [], "new": []}
    binaries = {"old": args.old, "new": args.new}
    for r in range(args.rounds):
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            result = attempt(f"round {r + 1} {name}", one_run, binaries[name], args.settings)
            results[name].append(result)
            if "failed" not in result:
                print(f"round {r + 1} {name}: {line(result)}", flush=True)
    for name, runs in results.items():
        for text in left_out(name, runs):
            print(text)
    for name, runs in results.items():
        good = succeeded(runs)
        if good:
            print(f"{name} medians of {len(good)}: "
                  + line({k: statistics.median(x[k] for x in good) for k in FIGURES}))


if __name__ == "__main__":
    main()
