#!/usr/bin/env python3
"""What the live dashboard costs the client: one case run without it, with it and one viewer, and
with ten viewers, in turn.

Each viewer does what the page does: asks for the page, and a second after the answer asks again.
Printed per run and as medians: the client's CPU-s per million acknowledged messages (the whole
process, from wait4) and its ratio to the run without the dashboard, and what the dashboard's own
threads used as brokerbench measured and printed it (their CPU time, as a share of one core and of
the run's CPU): runs differ by more than the dashboard costs, so that measure is the one to read.
A run that exits with problems is shown and left out.

Usage: bench/dashboard_cost.py [--rounds 3] [--viewers 1,10] -- SETTING...
  e.g. bench/dashboard_cost.py --rounds 3 -- driver=nats rate=5000 warmup=2s duration=60s
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RunFailed, attempt, left_out, settle, succeeded, summary_problems  # noqa: E402


def view(url, stop, answered):
    """One viewer: the page, then a second's pause, until `stop` is set."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            answered.append(1)
        except OSError:
            return
        stop.wait(1.0)


def dashboard_url(child):
    """The address `brokerbench run --dashboard` printed first on stderr."""
    for line in child.stderr:
        if line.startswith("live dashboard: "):
            return line.split(": ", 1)[1].strip()
    raise RunFailed("brokerbench printed no dashboard address")


def dashboard_cpu(lines):
    """The CPU-s the dashboard's threads used and the seconds it listened, from the line
    brokerbench prints as it exits: 'live dashboard: N requests answered with X CPU-s in Y s
    (Z% of a core)'."""
    for line in lines:
        if line.startswith("live dashboard: ") and " answered with " in line:
            cpu, rest = line.split(" answered with ", 1)[1].split(" CPU-s in ", 1)
            return float(cpu), float(rest.split(" s", 1)[0])
    raise RunFailed("brokerbench printed no dashboard cost line")


def one_run(binary, settings, viewers):
    settle()
    with tempfile.TemporaryDirectory(prefix="bb-dashboard-") as tmp:
        args = [binary, "run", "--quiet", "--out", os.path.join(tmp, "run")]
        for s in settings:
            args += ["--set", s]
        if viewers is not None:
            args.append("--dashboard")
        began = time.monotonic()
        child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stop, answered, threads = threading.Event(), [], []
        if viewers is not None:
            url = dashboard_url(child)
            threads = [threading.Thread(target=view, args=(url, stop, answered)) for _ in range(viewers)]
            for t in threads:
                t.start()
        rest = []
        drained = threading.Thread(target=lambda: rest.extend(child.stderr))
        drained.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - began
        stop.set()
        for t in threads + [drained]:
            t.join()
        code = os.waitstatus_to_exitcode(status)
        try:
            s = json.load(open(os.path.join(tmp, "run", "summary.json")))
        except (OSError, ValueError):
            raise RunFailed(f"brokerbench exited {code} and wrote no readable summary.json")
    problems = summary_problems(s)
    if code != 0 or problems:
        raise RunFailed(f"exited {code}: {'; '.join(problems) or 'see its notes'}")
    cpu = usage.ru_utime + usage.ru_stime
    own, listened = dashboard_cpu(rest) if viewers is not None else (0.0, wall)
    return {"cpu": cpu, "wall": wall, "pages": len(answered), "own": own, "listened": listened,
            "per_million": cpu * 1e6 / (s["total"]["acknowledged"] or s["total"]["sent"])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--viewers", default="1,10", help="viewer counts to try, comma-separated")
    parser.add_argument("--binary", default="target/release/brokerbench")
    parser.add_argument("settings", nargs="+", help="--set settings of the run, e.g. driver=nats rate=5000")
    args = parser.parse_args()
    cases = [None] + [int(v) for v in args.viewers.split(",")]
    name = {v: "no dashboard" if v is None else f"{v} viewer{'s' if v > 1 else ''}" for v in cases}
    results = {v: [] for v in cases}
    for r in range(args.rounds):
        for v in cases if r % 2 == 0 else list(reversed(cases)):
            result = attempt(f"round {r + 1} {name[v]}", one_run, args.binary, args.settings, v)
            results[v].append(result)
            if "failed" not in result:
                print(f"round {r + 1} {name[v]}: {result['per_million']:.2f} CPU-s per million, "
                      f"{result['cpu']:.2f} CPU-s in {result['wall']:.1f} s, {result['pages']} pages served, "
                      f"the dashboard's threads {result['own']:.3f} CPU-s", flush=True)
    for v in cases:
        for text in left_out(name[v], results[v]):
            print(text)
    base = succeeded(results[None])
    if not base:
        return
    base_per_million = statistics.median(x["per_million"] for x in base)
    base_cpu = statistics.median(x["cpu"] for x in base)
    base_wall = statistics.median(x["wall"] for x in base)
    print(f"no dashboard, median of {len(base)}: {base_per_million:.2f} CPU-s per million, "
          f"{base_cpu:.2f} CPU-s in {base_wall:.1f} s")
    for v in cases[1:]:
        good = succeeded(results[v])
        if good:
            per_million = statistics.median(x["per_million"] for x in good)
            own = statistics.median(x["own"] for x in good)
            core = statistics.median(x["own"] / x["listened"] for x in good)
            share = statistics.median(x["own"] / x["cpu"] for x in good)
            print(f"{name[v]}, median of {len(good)}: {per_million:.2f} CPU-s per million "
                  f"({per_million / base_per_million:.3f}x); the dashboard's threads used {own:.3f} CPU-s, "
                  f"{core * 100:.2f}% of a core and {share * 100:.2f}% of the run's CPU")


if __name__ == "__main__":
    main()
