#!/usr/bin/env python3
"""Side-by-side benchmark with Artemis's own `artemis perf client` on one managed Artemis, in one go.

Cases: 100-byte durable messages to one topic (a multicast address) with one producer and
one consumer, each send confirmed by the broker (brokerbench: a STOMP receipt; perf client:
the Core protocol's send acknowledgement) with at most 1,000 unconfirmed, each delivery
acknowledged; at a fixed --rate (default 2,000 msg/s) and at the maximum rate. Both tools
warm up 2 s and then measure --seconds.

Rates are each tool's own: brokerbench's acknowledged rate over its measurement window;
perf client's completed sends over its measured intervals (its --json report). Client CPU is
user+sys of the whole child process from wait4 (start-up, the JVM's included, and drain), over
the messages it sent. Rounds alternate which tool goes first; medians over the rounds, and
ratios brokerbench / perf client.

Usage: bench/artemis_perf.py [--rounds 3] [--seconds 10] [--rate 2000]
Needs: nothing more; the managed Artemis is started (and fetched from Maven Central) if it is
not running, and perf client is in its distribution.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, RunFailed, attempt, home, left_out, succeeded, summary_problems, tail, timed  # noqa: E402

SIZE = 100
PENDING = 1000
WARMUP = 2


def brokerbench(rate, seconds):
    out = tempfile.mkdtemp(prefix="bb-artemis-bench-")
    shutil.rmtree(out)
    cmd = [BIN, "run", "--quiet", "--no-monitor", "--out", out,
           "--set", "driver=artemis", "--set", f"rate={rate}", "--set", f"message_size={SIZE}B",
           "--set", f"warmup={WARMUP}s", "--set", f"duration={seconds}s",
           "--set", f"max_outstanding={PENDING}"]
    usage = timed(cmd, allowed=(0, 1))
    try:
        s = json.load(open(os.path.join(out, "summary.json")))
    except (OSError, ValueError):
        raise RunFailed(f"brokerbench exited {usage.code} and wrote no readable summary.json:\n{tail(usage.text)}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    problems = summary_problems(s)
    # At the maximum rate "below the target" is what max means, not a problem.
    if (usage.code != 0 and rate != "max") or problems:
        raise RunFailed(f"brokerbench exited {usage.code}: {'; '.join(problems) or 'see its notes'}")
    sent = s["total"]["sent"]
    return {"rate": s["throughput"]["acknowledged_per_s"],
            "p99_ms": s["latency"]["publish"]["p99_ns"] / 1e6,
            "cpu_per_m": usage.cpu / sent * 1e6, "rss": usage.rss_mb, "msgs": sent}


def perf_client(artemis, url, rate, seconds):
    report = tempfile.mktemp(prefix="artemis-perf-", suffix=".json")
    cmd = [artemis, "perf", "client", "--url", url, "--persistent", "--message-size", str(SIZE),
           "--duration", str(seconds), "--warmup", str(WARMUP), "--max-pending", str(PENDING),
           "--silent", "--json", report, "topic://brokerbench-perf"]
    if rate != "max":
        cmd[3:3] = ["--rate", str(rate)]
    usage = timed(cmd)
    try:
        samples = json.load(open(report))
    except (OSError, ValueError):
        raise RunFailed(f"perf client wrote no readable report:\n{tail(usage.text)}")
    finally:
        if os.path.exists(report):
            os.remove(report)
    summary = samples[-1]
    if summary.get("result") != "success":
        raise RunFailed(f"perf client's result: {summary.get('result')}")
    start = max(x["time"] for x in samples if x.get("warmup"))
    measured = [x for x in samples if x.get("sampleType") == "interval" and not x.get("warmup")]
    elapsed = (measured[-1]["time"] - start) / 1000
    completed = sum(x["completed"] for x in measured)
    sent = summary["totalSent"]
    return {"rate": completed / elapsed, "p99_ms": summary["totalSendTime"]["99"] / 1000,
            "cpu_per_m": usage.cpu / sent * 1e6, "rss": usage.rss_mb, "msgs": sent}


def compare(case, rate, args, artemis, url):
    results = {"brokerbench": [], "perf client": []}
    for r in range(args.rounds):
        order = ["brokerbench", "perf client"] if r % 2 else ["perf client", "brokerbench"]
        for tool in order:
            label = f"{case} round {r + 1} {tool}"
            res = (attempt(label, brokerbench, rate, args.seconds) if tool == "brokerbench"
                   else attempt(label, perf_client, artemis, url, rate, args.seconds))
            results[tool].append(res)
            if "failed" not in res:
                print(f"{label:32} {res['rate']:>9,.0f} msg/s  publish p99 {res['p99_ms']:8.2f} ms  "
                      f"{res['cpu_per_m']:7.2f} CPU-s/M  RSS {res['rss']:.0f} MB  ({res['msgs']:,} msgs)", flush=True)
    for tool, runs in results.items():
        for line in left_out(f"{case} {tool}", runs):
            print(line)
    if not all(succeeded(v) for v in results.values()):
        print(f"{case}: no ratios, every run of a tool failed")
        return
    med = {t: {k: statistics.median(x[k] for x in succeeded(v)) for k in ("rate", "p99_ms", "cpu_per_m", "rss")}
           for t, v in results.items()}
    b, p = med["brokerbench"], med["perf client"]
    print(f"{case} medians: brokerbench {b['rate']:,.0f} msg/s, {b['cpu_per_m']:.2f} CPU-s/M, p99 {b['p99_ms']:.2f} ms; "
          f"perf client {p['rate']:,.0f} msg/s, {p['cpu_per_m']:.2f} CPU-s/M, p99 {p['p99_ms']:.2f} ms")
    print(f"{case} ratios (brokerbench / perf client): rate {b['rate'] / p['rate']:.2f}x, "
          f"CPU per message {b['cpu_per_m'] / p['cpu_per_m']:.2f}x\n", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", default="2000")
    args = parser.parse_args()
    up = subprocess.run([BIN, "broker", "up", "artemis"], capture_output=True, text=True, check=True).stdout
    url = "tcp://" + re.search(r"127\.0\.0\.1:\d+", up).group(0)
    artemis = os.path.join(home(), "artemis", "2.40.0", "apache-artemis-2.40.0", "bin", "artemis")
    compare(f"fixed {args.rate} msg/s", args.rate, args, artemis, url)
    compare("max rate", "max", args, artemis, url)


if __name__ == "__main__":
    main()
