#!/usr/bin/env python3
"""One process against 2 and 4 shards of the same workload, at max rate, on this machine.

    bench/shards.py [--seconds 10] [--shards 1,2,4] [--set FIELD=VALUE ...]

Each configuration runs against the managed Kafka (started if needed): one `brokerbench run`,
or N `brokerbench run --shard I/N` processes at once merged with `brokerbench merge`. Prints,
per configuration, the merged rate and latency, the client CPU of every process (user and
system, start-up included, from wait4) and the broker's CPU, then one line per shard.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

from common import BIN

WORKLOAD = [
    "rate=max",
    "topics=1",
    "partitions_per_topic=4",
    "producers_per_topic=4",
    "consumers_per_topic=0",
    "message_size=100B",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(commands):
    """Starts every command at once; returns [(user s, system s, peak RSS MB)]."""
    children = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for c in commands]
    usage = {}
    while len(usage) < len(children):
        pid, status, ru = os.wait4(-1, 0)
        usage[pid] = (os.waitstatus_to_exitcode(status), ru.ru_utime, ru.ru_stime, ru.ru_maxrss / 1024)
    out = []
    for c, child in zip(commands, children):
        code, user, system, rss = usage[child.pid]
        if code != 0:
            sys.exit(f"{' '.join(c)} failed ({code}):\n{child.stderr.read()[-3000:]}")
        out.append((user, system, rss))
    return out


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--shards", default="1,2,4")
    parser.add_argument("--set", action="append", default=[], dest="sets")
    args = parser.parse_args()
    subprocess.run([BIN, "broker", "up", "kafka"], check=True, stdout=subprocess.DEVNULL)
    sets = WORKLOAD + [f"duration={args.seconds}s", "warmup=2s"] + args.sets
    common = [x for s in sets for x in ("--set", s)] + ["--quiet"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.shards.split(",")]:
            base = os.path.join(tmp, f"n{n}")
            if n == 1:
                usage = run_processes([[BIN, "run", *common, "--out", base]])
                folder, folders = base, [base]
            else:
                port, run_id = free_port(), f"bench{n}x{os.getpid()}"
                folders = [f"{base}-shard-{i}" for i in range(n)]
                usage = run_processes([
                    [BIN, "run", *common, "--shard", f"{i}/{n}", "--run-id", run_id,
                     "--coordinator", f"127.0.0.1:{port}", "--out", folders[i]]
                    for i in range(n)])
                folder = base + "-merged"
                subprocess.run([BIN, "merge", *folders, "-o", folder], check=True,
                               stdout=subprocess.DEVNULL)
            s = load(os.path.join(folder, "summary.json"))
            shards = [load(os.path.join(f, "summary.json")) for f in folders]
            broker = (s.get("resources") or {}).get("broker") or {}
            cpu = sum(u + y for u, y, _ in usage)
            acked = s["total"]["acknowledged"]
            rows.append((n, s, shards, usage, cpu, acked, broker))
    print(f"{'processes':>9} {'ack. msg/s':>12} {'publish p50':>12} {'p99':>10} "
          f"{'client CPU-s':>12} {'CPU-s/M':>8} {'broker CPU %':>12}")
    for n, s, _, _, cpu, acked, broker in rows:
        lat = s["latency"]["publish"]
        print(f"{n:>9} {s['throughput']['acknowledged_per_s']:>12,.0f} {lat['p50_ns'] / 1e6:>10.2f}ms "
              f"{lat['p99_ns'] / 1e6:>8.2f}ms {cpu:>12.2f} {cpu / acked * 1e6:>8.3f} "
              f"{(broker.get('cpu_user_pct_mean') or 0) + (broker.get('cpu_system_pct_mean') or 0):>12.0f}")
    print()
    print(f"{'shard':>9} {'ack. msg/s':>12} {'user s':>8} {'system s':>8} {'CPU-s/M':>8} "
          f"{'lag p99':>10} {'RSS MB':>7}")
    for n, _, shards, usage, _, _, _ in rows:
        for i, (sh, (user, system, rss)) in enumerate(zip(shards, usage)):
            print(f"{f'{i}/{n}':>9} {sh['throughput']['acknowledged_per_s']:>12,.0f} {user:>8.2f} "
                  f"{system:>8.2f} {(user + system) / sh['total']['acknowledged'] * 1e6:>8.3f} "
                  f"{sh['latency']['schedule_lag']['p99_ns'] / 1e6:>8.2f}ms {rss:>7.0f}")


if __name__ == "__main__":
    main()
