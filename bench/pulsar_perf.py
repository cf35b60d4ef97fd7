#!/usr/bin/env python3
"""Side-by-side benchmark with Pulsar's own `pulsar-perf` on one managed Pulsar, in one go.

Cases: 100-byte persistent messages to one topic with one producer and one consumer, sends
batched (at most 1 ms, Pulsar's default and OMB's) with at most 1,000 unconfirmed, each
delivery acknowledged; at a fixed --rate (default 2,000 msg/s) and at the maximum rate.
brokerbench warms up 2 s and then measures --seconds; `pulsar-perf produce` runs
--seconds + 2 with `pulsar-perf consume` beside it (started first, on the same topic).

Rates are each tool's own: brokerbench's acknowledged rate over its measurement window;
pulsar-perf's mean of its per-second rates after the first two seconds (its client's `Publish throughput` lines, `-i 1`).
Client CPU is user+sys of the child processes from wait4 (brokerbench's one; pulsar-perf's
producer and consumer JVMs, start-up included), over the messages sent. Rounds alternate
which tool goes first; medians over the rounds, and ratios brokerbench / pulsar-perf.

Usage: bench/pulsar_perf.py [--rounds 3] [--seconds 10] [--rate 2000]
Needs: nothing more; the managed Pulsar is started (and fetched from Maven Central) if it is
not running, and pulsar-perf is in its distribution.
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
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, RunFailed, attempt, home, left_out, settle, succeeded, summary_problems, tail, timed  # noqa: E402

SIZE = 100
PENDING = 1000
WARMUP = 2
VERSION = "4.0.8"


def brokerbench(rate, seconds, url):
    out = tempfile.mkdtemp(prefix="bb-pulsar-bench-")
    shutil.rmtree(out)
    cmd = [BIN, "run", "--quiet", "--no-monitor", "--out", out,
           "--set", "driver=pulsar", "--set", f"rate={rate}", "--set", f"message_size={SIZE}B",
           "--set", f"warmup={WARMUP}s", "--set", f"duration={seconds}s",
           "--set", f"max_pending_messages={PENDING}", "--set", f"service_url={url}"]
    usage = timed(cmd, allowed=(0, 1))
    try:
        s = json.load(open(os.path.join(out, "summary.json")))
    except (OSError, ValueError):
        raise RunFailed(f"brokerbench exited {usage.code} and wrote no readable summary.json:\n{tail(usage.text)}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    problems = summary_problems(s)
    if (usage.code != 0 and rate != "max") or problems:
        raise RunFailed(f"brokerbench exited {usage.code}: {'; '.join(problems) or 'see its notes'}")
    sent = s["total"]["sent"]
    return {"rate": s["throughput"]["acknowledged_per_s"],
            "p99_ms": s["latency"]["publish"]["p99_ns"] / 1e6,
            "cpu_per_m": usage.cpu / sent * 1e6, "rss": usage.rss_mb, "msgs": sent}


def pulsar_perf(perf, url, rate, seconds):
    topic = f"persistent://public/default/bbperf-{os.getpid()}-{time.monotonic_ns()}"
    total = seconds + WARMUP
    consumer = {}

    def consume():
        try:
            consumer["usage"] = timed([perf, "consume", "-u", url, "-ss", "perf", "-time", str(total + 5), topic])
        except RunFailed as failed:
            consumer["failed"] = str(failed)

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(4)  # its JVM starts and subscribes before anything is sent
    target = "10000000" if rate == "max" else str(rate)
    produced = timed([perf, "produce", "-u", url, "-r", target, "-s", str(SIZE), "-o", str(PENDING),
                      "-i", "1", "--warmup-time", str(WARMUP), "-time", str(total), topic])
    thread.join()
    if "failed" in consumer:
        raise RunFailed(f"pulsar-perf consume: {consumer['failed']}")
    sent = re.findall(r"Aggregated throughput stats --- (\d+) records sent", produced.text)
    p99 = re.findall(r"Aggregated latency stats --- .*?99pct:\s*([\d.]+)", produced.text)
    # Its per-second lines after the warm-up: the rate while it ran.
    rates = [float(r) for r in re.findall(r"Publish throughput: ([\d.]+) msg/s", produced.text)][WARMUP:]
    if not sent or not p99 or not rates:
        raise RunFailed(f"pulsar-perf printed no aggregated stats:\n{tail(produced.text)}")
    msgs, per_s = int(sent[-1]), statistics.mean(rates)
    cpu = produced.cpu + consumer["usage"].cpu
    return {"rate": per_s, "p99_ms": float(p99[-1]), "cpu_per_m": cpu / msgs * 1e6,
            "rss": produced.rss_mb + consumer["usage"].rss_mb, "msgs": msgs}


def compare(case, rate, args, perf, url):
    results = {"brokerbench": [], "pulsar-perf": []}
    for r in range(args.rounds):
        order = ["brokerbench", "pulsar-perf"] if r % 2 else ["pulsar-perf", "brokerbench"]
        for tool in order:
            settle()
            label = f"{case} round {r + 1} {tool}"
            res = (attempt(label, brokerbench, rate, args.seconds, url) if tool == "brokerbench"
                   else attempt(label, pulsar_perf, perf, url, rate, args.seconds))
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
    b, p = med["brokerbench"], med["pulsar-perf"]
    print(f"{case} medians: brokerbench {b['rate']:,.0f} msg/s, {b['cpu_per_m']:.2f} CPU-s/M, p99 {b['p99_ms']:.2f} ms; "
          f"pulsar-perf {p['rate']:,.0f} msg/s, {p['cpu_per_m']:.2f} CPU-s/M, p99 {p['p99_ms']:.2f} ms")
    print(f"{case} ratios (brokerbench / pulsar-perf): rate {b['rate'] / p['rate']:.2f}x, "
          f"CPU per message {b['cpu_per_m'] / p['cpu_per_m']:.2f}x\n", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", default="2000")
    args = parser.parse_args()
    up = subprocess.run([BIN, "broker", "up", "pulsar"], capture_output=True, text=True, check=True).stdout
    url = "pulsar://" + re.search(r"127\.0\.0\.1:\d+", up).group(0)
    perf = os.path.join(home(), "pulsar", VERSION, f"apache-pulsar-{VERSION}", "bin", "pulsar-perf")
    compare(f"fixed {args.rate} msg/s", args.rate, args, perf, url)
    compare("max rate", "max", args, perf, url)


if __name__ == "__main__":
    main()
