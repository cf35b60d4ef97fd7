#!/usr/bin/env python3
"""Pacing and its cost, read from the wire: how evenly each tool sends a fixed rate, and what the
client pays for it, side by side in one go.

At a fixed rate most of a client's CPU is waking up to send (on this 2-core virtual machine a
thread's wake-up costs tens of µs of accounted CPU, more than the send), so a tool that sends in
bursts pays less per message than one that keeps an even schedule. Neither side's own figures
show which it does: PerfTest and `nats bench` time from the actual send, and brokerbench's
schedule lag is its own account. This bench captures what the clients send to the broker's port
on loopback (tcpdump) and finds every publish in the byte streams (bench/wire.py), so each tool's
pacing is measured the same way, from outside:

  - msg/s: publishes seen on the wire per second over the part of the run from 30% to 95% of its
    span (a JVM's first seconds left out), with the slowest and the fastest second;
  - lag p50/p99/max: each publish's lateness behind an even schedule at its second's rate
    (anchored so that the publish of the second furthest ahead of it has lag 0) — brokerbench's
    schedule lag, taken from the wire, for every tool (it cannot see a lag common to all of a
    second's publishes);
  - burst: the share of publishes that left within 20 µs of the one before;
  - CPU-s per million: the client process's user+system CPU (wait4, start-up included) per
    publish seen on the wire, and steady: its CPU per second from 40% to 85% of its life (from
    /proc) over its rate on the wire, without a JVM's start-up; switches per message: how often
    its threads were switched out (voluntary and involuntary, wait4), the wake-ups it pays for;
  - for brokerbench, its own schedule lag p50/p99 (summary.json) beside the wire's: the check
    that what it reports of its pacing is what left the client.

Tools, at a fixed --rate, 100 B, one producer and one consumer with acknowledgements, medians of
--rounds:
  rabbitmq: brokerbench at its default schedule_resolution (100 µs) and at --coarse (1 ms), and
            RabbitMQ PerfTest 2.22.1 (-r RATE), alternating which goes first; the cost matrix's
            RabbitMQ settings (confirms, at most 1,000 unconfirmed, prefetch 1,000, manual ack of
            each delivery).
  nats:     brokerbench at both resolutions (the bundled driver file's settings), and `nats bench
            --pubsleep D --pubbatch 100 --consumerbatch 100` if --nats names the NATS CLI: it has
            no rate, only a sleep after each publish, so it goes first in each round, publishing
            --rate x --seconds messages at the rate its sleep gives (longer than --seconds when
            that rate is lower), and brokerbench then runs at the rate it reached on the wire.
The two brokerbench runs alternate their order from round to round. The capture is attached to
every tool alike; on loopback its copy of each packet is made in the sender's system time.

Usage: bench/pacing.py [--family rabbitmq|nats|all] [--rounds 3] [--seconds 10]
                       [--rate 10000] [--coarse 1ms] [--nats /tmp/gobin/nats --pubsleep 50us]
Needs: tcpdump (apt-get install tcpdump) and root for it; Java and Maven for PerfTest; the managed
broker is started if it is not running.
"""

import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, ROOT, RunFailed, attempt, left_out, median, settle,  # noqa: E402
                    succeeded, timed)
from nats_bench import nats_bench_command  # noqa: E402
from rabbitmq_perftest import SIZE as PERFTEST_SIZE, perftest_command  # noqa: E402
from wire import Capture, pacing, publish_times, remove  # noqa: E402

SIZE = PERFTEST_SIZE  # the same messages as PerfTest's
RABBITMQ_SETTINGS = ["queue.type=classic", "queue.durable=false", "persistent=false", "confirms.enabled=true",
                     "confirms.max_outstanding=1000", "ack.mode=manual", "ack.multiple_every=1", "prefetch=1000"]
FIGURES = ("rate", "slowest", "fastest", "cpu", "steady", "switches", "lag_p50", "lag_p99", "lag_max", "burst")


def broker_port(family):
    """Starts the managed broker if needed; returns its client port."""
    up = subprocess.run([BIN, "broker", "up", family], check=True, capture_output=True, text=True).stdout
    found = re.search(r"\bat [\d.]+:(\d+)", up)
    if not found:
        raise SystemExit(f"could not tell the {family} broker's port from `brokerbench broker up`:\n{up}")
    return int(found.group(1))


def measured(cmd, port, protocol, allowed=(0,)):
    """Runs cmd under a capture of what is sent to `port`; the figures of its publishes."""
    settle()
    fd, path = tempfile.mkstemp(prefix="bb-pacing-", suffix=".pcap")
    os.close(fd)
    try:
        capture = Capture(port, path).start()
        try:
            usage = timed(cmd, merge=False, allowed=allowed)
        finally:
            capture.stop()
        times = publish_times(path, protocol)
    except (OSError, ValueError, struct.error, subprocess.TimeoutExpired) as e:
        raise RunFailed(f"the capture could not be read: {e}")
    finally:
        remove(path)
    paced = pacing(times)
    if paced is None:
        raise RunFailed(f"{len(times)} publishes seen on the wire: too few to tell its pacing")
    steady = usage.steady_cpu_per_s()
    return {**paced, "cpu": usage.cpu / len(times) * 1e6, "switches": usage.switches / len(times),
            "steady": steady / paced["rate"] * 1e6 if steady is not None else float("nan"),
            "messages": len(times)}


def brokerbench(family, rate, seconds, resolution, port):
    sets = [f"rate={rate}", f"message_size={SIZE}B", "warmup=0s", f"duration={seconds}s",
            f"schedule_resolution={resolution}"] + (RABBITMQ_SETTINGS if family == "rabbitmq" else [])
    driver = os.path.join(ROOT, "workloads", "drivers", f"{family}.yaml")
    with tempfile.TemporaryDirectory(prefix="bb-pacing-") as tmp:
        cmd = [BIN, "run", "--driver", driver, "--quiet", "--no-monitor", "--out", os.path.join(tmp, "run")]
        for s in sets:
            cmd += ["--set", s]
        result = measured(cmd, port, "amqp" if family == "rabbitmq" else "nats")
        with open(os.path.join(tmp, "run", "summary.json")) as f:
            lag = json.load(f)["latency"]["schedule_lag"]
    # What brokerbench says of its own pacing, beside what the wire shows.
    return {**result, "own_p50": lag["p50_ns"] / 1e3, "own_p99": lag["p99_ns"] / 1e3}


def perftest(rate, seconds, port):
    cmd = perftest_command(f"127.0.0.1:{port}", seconds, True, rate, "bench-pacing")
    return measured(cmd, port, "amqp")


def nats_bench(nats, pubsleep, rate, seconds, port):
    cmd = nats_bench_command(nats, f"nats://127.0.0.1:{port}", rate * seconds, pubsleep)
    return measured(cmd, port, "nats")


def tools(family, args, port):
    """name: run(rate) for each tool of the family's case, the peer first."""
    peer = {}
    if family == "rabbitmq":
        peer["PerfTest"] = lambda rate: perftest(rate, args.seconds, port)
    elif args.nats:
        peer[f"nats bench --pubsleep {args.pubsleep}"] = lambda rate: nats_bench(args.nats, args.pubsleep, rate,
                                                                                args.seconds, port)
    ours = {f"brokerbench {res}": (lambda rate, res=res: brokerbench(family, rate, args.seconds, res, port))
            for res in ("100us", args.coarse)}
    return {**peer, **ours}


def round_of(family, runs, args, number, results):
    """One round. PerfTest and brokerbench alternate which goes first and run at --rate; nats
    bench has no rate (only its sleep), so it goes first and brokerbench runs at the rate it
    reached on the wire (the last rate it reached, or --rate, when it failed)."""
    peers = [name for name in runs if not name.startswith("brokerbench")]
    ours = [name for name in runs if name.startswith("brokerbench")]
    if number % 2:
        ours.reverse()
    paced_by_peer = family == "nats" and bool(peers)
    names = peers + ours if paced_by_peer or number % 2 == 0 else ours + peers
    rate = args.rate
    if paced_by_peer:
        reached = [r["rate"] for r in results[peers[0]] if "failed" not in r]
        rate = round(reached[-1]) if reached else args.rate
    print(f"{family}, round {number + 1}:", flush=True)
    for name in names:
        result = attempt(f"{name}, round {number + 1}", runs[name], rate)
        results[name].append(result)
        print(line(name, result), flush=True)
        if paced_by_peer and name in peers and "failed" not in result:
            rate = round(result["rate"])


def line(name, result):
    if "failed" in result:
        return f"  {name:32} FAILED: {result['failed']}"
    return (f"  {name:32} {result['rate']:>7,.0f} msg/s ({result['slowest']:,.0f}-{result['fastest']:,.0f})  "
            f"{result['cpu']:7.2f} CPU-s/M (steady {result['steady']:6.2f})  "
            f"{result['switches']:5.2f} switches/msg  lag p50 {result['lag_p50']:7.0f} µs  "
            f"p99 {result['lag_p99']:7.0f} µs  max {result['lag_max']:8.0f} µs  burst {result['burst']:5.1%}"
            + (f"  (its own schedule lag p50 {result['own_p50']:.0f} µs, p99 {result['own_p99']:.0f} µs)"
               if "own_p50" in result else ""))


def compare(family, args):
    port = broker_port(family)
    runs = tools(family, args, port)
    results = {name: [] for name in runs}
    for r in range(args.rounds):
        round_of(family, runs, args, r, results)
    print(f"\n{family}, medians of {args.rounds} rounds (lag from the wire, behind an even schedule at each "
          "second's rate):")
    medians = {}
    for name, rs in results.items():
        ok = succeeded(rs)
        if ok:
            keys = FIGURES + (("own_p50", "own_p99") if "own_p50" in ok[0] else ())
            medians[name] = {k: median([x[k] for x in ok]) for k in keys}
            print(line(name, medians[name]))
        for note in left_out(name, rs):
            print("  " + note)
    peers = [name for name in medians if not name.startswith("brokerbench")]
    for name, ours in medians.items():
        for peer_name in (peers if name.startswith("brokerbench") else []):
            peer = medians[peer_name]
            ratio = lambda key: ours[key] / peer[key] if peer[key] else math.nan  # noqa: E731
            print(f"  {name} / {peer_name}: {ratio('cpu'):.2f}x CPU per message (steady {ratio('steady'):.2f}x), "
                  f"{ratio('lag_p50'):.2f}x its lag p50, {ratio('lag_p99'):.2f}x its lag p99")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", choices=("rabbitmq", "nats", "all"), default="all")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rate", type=int, default=10000)
    p.add_argument("--coarse", default="1ms", help="brokerbench's second schedule_resolution")
    p.add_argument("--nats", help="the NATS CLI, for nats bench beside brokerbench on NATS")
    p.add_argument("--pubsleep", default="50us", help="nats bench's sleep after each publish")
    args = p.parse_args()
    if subprocess.run(["which", "tcpdump"], capture_output=True).returncode != 0:
        raise SystemExit("bench/pacing.py needs tcpdump: apt-get install tcpdump")
    for family in (("rabbitmq", "nats") if args.family == "all" else (args.family,)):
        compare(family, args)


if __name__ == "__main__":
    main()
