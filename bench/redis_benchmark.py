#!/usr/bin/env python3
"""Side-by-side benchmark with Redis's own `redis-benchmark` (XADD) on one managed Redis, in one go.

Cases: 100-byte entries XADDed to one stream by one connection, producer only (redis-benchmark
has no consumer), each acknowledged by the server's reply; with up to 1,000 commands in flight
(brokerbench `max_outstanding: 1000`, redis-benchmark `-P 1000`) and with one at a time
(`max_outstanding: 1`, `-P 1`). redis-benchmark has no fixed rate: both run at the maximum.

Rates are each tool's own: brokerbench's acknowledged rate over its measurement window (after a
2 s warm-up, --seconds long); redis-benchmark's requests per second over its whole run (it sends
a number of requests, sized here to take about --seconds). Client CPU is user+sys of the whole
child process from wait4, over the messages it sent. Between runs the stream is deleted and the
host left to settle. Rounds alternate which tool goes first; medians over the rounds, and ratios
brokerbench / redis-benchmark.

Usage: bench/redis_benchmark.py [--rounds 3] [--seconds 10]
Needs: redis-benchmark (Debian's redis-tools, which scripts/setup installs); the managed Redis
is started if it is not running.
"""

import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, RunFailed, attempt, left_out, settle, succeeded, summary_problems, tail, timed  # noqa: E402

SIZE = 100
WARMUP = 2
STREAM = "brokerbench-redis-benchmark"
# Requests per second of run each case sends redis-benchmark, from one run of each here
# (about 850,000/s pipelined, 19,000/s one at a time).
EXPECTED = {1000: 850_000, 1: 19_000}


def brokerbench(pipeline, seconds):
    out = tempfile.mkdtemp(prefix="bb-redis-bench-")
    shutil.rmtree(out)
    cmd = [BIN, "run", "--quiet", "--no-monitor", "--out", out,
           "--set", "driver=redis", "--set", "rate=max", "--set", f"message_size={SIZE}B",
           "--set", f"warmup={WARMUP}s", "--set", f"duration={seconds}s",
           "--set", "consumers_per_topic=0", "--set", f"max_outstanding={pipeline}"]
    usage = timed(cmd, allowed=(0, 1))
    try:
        s = json.load(open(os.path.join(out, "summary.json")))
    except (OSError, ValueError):
        raise RunFailed(f"brokerbench exited {usage.code} and wrote no readable summary.json:\n{tail(usage.text)}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    problems = summary_problems(s)
    if problems:
        raise RunFailed(f"brokerbench exited {usage.code}: {'; '.join(problems)}")
    sent = s["total"]["sent"]
    return {"rate": s["throughput"]["acknowledged_per_s"],
            "cpu_per_m": usage.cpu / sent * 1e6, "rss": usage.rss_mb, "msgs": sent}


def redis_benchmark(port, pipeline, seconds):
    requests = EXPECTED[pipeline] * seconds
    cmd = ["redis-benchmark", "-p", str(port), "-c", "1", "-P", str(pipeline), "-n", str(requests),
           "--csv", "-x", "XADD", STREAM, "*", "p"]
    with tempfile.TemporaryFile() as payload:
        payload.write(b"x" * SIZE)
        payload.seek(0)
        usage = timed_with_input(cmd, payload)
    rows = list(csv.reader(io.StringIO(usage.text)))
    rate = float(rows[-1][1])
    return {"rate": rate, "cpu_per_m": usage.cpu / requests * 1e6, "rss": usage.rss_mb, "msgs": requests}


def timed_with_input(cmd, stdin):
    """`timed` with the child's standard input from the file `stdin`."""
    saved = os.dup(0)
    os.dup2(stdin.fileno(), 0)
    try:
        return timed(cmd, merge=False)
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def clear(port):
    subprocess.run(["redis-cli", "-p", str(port), "DEL", STREAM], capture_output=True)
    settle()


def compare(case, pipeline, args, port):
    results = {"brokerbench": [], "redis-benchmark": []}
    for r in range(args.rounds):
        order = ["brokerbench", "redis-benchmark"] if r % 2 else ["redis-benchmark", "brokerbench"]
        for tool in order:
            clear(port)
            label = f"{case} round {r + 1} {tool}"
            res = (attempt(label, brokerbench, pipeline, args.seconds) if tool == "brokerbench"
                   else attempt(label, redis_benchmark, port, pipeline, args.seconds))
            results[tool].append(res)
            if "failed" not in res:
                print(f"{label:44} {res['rate']:>9,.0f} msg/s  {res['cpu_per_m']:7.2f} CPU-s/M  "
                      f"RSS {res['rss']:.0f} MB  ({res['msgs']:,} msgs)", flush=True)
    clear(port)
    for tool, runs in results.items():
        for line in left_out(f"{case} {tool}", runs):
            print(line)
    if not all(succeeded(v) for v in results.values()):
        print(f"{case}: no ratios, every run of a tool failed")
        return
    med = {t: {k: statistics.median(x[k] for x in succeeded(v)) for k in ("rate", "cpu_per_m", "rss")}
           for t, v in results.items()}
    b, p = med["brokerbench"], med["redis-benchmark"]
    print(f"{case} medians: brokerbench {b['rate']:,.0f} msg/s, {b['cpu_per_m']:.2f} CPU-s/M, RSS {b['rss']:.0f} MB; "
          f"redis-benchmark {p['rate']:,.0f} msg/s, {p['cpu_per_m']:.2f} CPU-s/M, RSS {p['rss']:.0f} MB")
    print(f"{case} ratios (brokerbench / redis-benchmark): rate {b['rate'] / p['rate']:.2f}x, "
          f"CPU per message {b['cpu_per_m'] / p['cpu_per_m']:.2f}x\n", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    if not shutil.which("redis-benchmark"):
        sys.exit("redis-benchmark is missing: install Debian's redis-tools (scripts/setup does)")
    up = subprocess.run([BIN, "broker", "up", "redis"], capture_output=True, text=True, check=True).stdout
    port = int(re.search(r"127\.0\.0\.1:(\d+)", up).group(1))
    compare("1,000 in flight", 1000, args, port)
    compare("one at a time", 1, args, port)


if __name__ == "__main__":
    main()
