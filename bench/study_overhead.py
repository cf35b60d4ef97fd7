#!/usr/bin/env python3
"""What a study costs beyond its runs, and how repeatable the throughput search is.

1. Overhead per run: runs a grid study of N short runs against the managed Kafka
   (broker: keep) and reports, per run, the study's wall time less the run's own warm-up,
   measurement and drain (the drain's length read from the run's timeseries.csv: its rows in
   the drain phase). What remains is process start, connecting, creating and deleting the
   topics, the monitor's start and stop, and writing the tables.
2. The search: runs studies/max-sustainable-kafka.yaml (3 searches of the quickstart with a
   20 ms publish p99 objective) and reports, per search, the found rate, the bracket, the
   number of steps and the time taken, and the spread of the found rate over the searches.

Usage: bench/study_overhead.py [--runs 10] [--skip-search] [--skip-overhead]
Needs: scripts/setup done; the managed Kafka is started if it is not running.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "brokerbench")


def study(path, out, extra=()):
    start = time.monotonic()
    subprocess.run([BIN, "study", path, "--out", out, *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def drain_seconds(run_folder):
    """From the start of the drain (its first timeseries row) to the run's recorded end."""
    with open(os.path.join(run_folder, "timeseries.csv")) as f:
        start = next(float(r["time_s"]) for r in csv.DictReader(f) if r["phase"] == "drain")
    with open(os.path.join(run_folder, "manifest.json")) as f:
        end = json.load(f)["ended_at_ns"] / 1e9
    return end - start


def overhead(runs):
    tmp = tempfile.mkdtemp(prefix="bb-study-overhead-")
    spec = os.path.join(tmp, "overhead.yaml")
    with open(spec, "w") as f:
        f.write("name: overhead\n"
                f"workload: {ROOT}/workloads/quickstart.yaml\n"
                "set: {rate: 10000, warmup: 2s, duration: 5s, drain_timeout: 10s}\n"
                f"repetitions: {runs}\n")
    out = os.path.join(tmp, "out")
    wall = study(spec, out)
    with open(os.path.join(out, "study.json")) as f:
        records = json.load(f)["runs"]
    phases = sum(2 + 5 + drain_seconds(os.path.join(out, r["results"])) for r in records)
    per_run = (wall - phases) / len(records)
    print(f"overhead: {len(records)} runs of 2 s warm-up + 5 s measurement at 10,000 msg/s, "
          f"broker: keep; study wall time {wall:.1f} s, warm-up + measurement + drain "
          f"{phases:.1f} s; overhead per run {per_run:.2f} s")


def search():
    tmp = tempfile.mkdtemp(prefix="bb-study-search-")
    out = os.path.join(tmp, "out")
    wall = study(os.path.join(ROOT, "studies", "max-sustainable-kafka.yaml"), out)
    with open(os.path.join(out, "search.json")) as f:
        doc = json.load(f)
    found = []
    for s in doc["searches"]:
        steps = s["steps"]
        found.append(s["found_rate"])
        print(f"search {s['repetition']}: found {s['found_rate']:.0f} msg/s, bracket "
              f"{s['bracket']}, {len(steps)} steps, offered "
              f"{[round(x['offered']) for x in steps]}")
    ok = [f for f in found if f]
    if len(ok) >= 2:
        mean = statistics.mean(ok)
        spread = max(abs(f - mean) / mean for f in ok) * 100
        print(f"found rate: mean {mean:.0f} msg/s, largest deviation from the mean "
              f"±{spread:.1f}%; {len(doc['searches'])} searches in {wall / 60:.1f} min")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args()
    subprocess.run([BIN, "broker", "up", "kafka"], check=True, stdout=subprocess.DEVNULL)
    if not args.skip_overhead:
        overhead(args.runs)
    if not args.skip_search:
        search()


if __name__ == "__main__":
    sys.exit(main())
