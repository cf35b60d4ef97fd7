#!/usr/bin/env python3
"""Side-by-side benchmark with RabbitMQ PerfTest on one local RabbitMQ, in one go.

Runs, alternating (PerfTest first in odd rounds, brokerbench first in even ones), ROUNDS
rounds of three cases, each with RabbitMQ PerfTest 2.22.1 and with brokerbench:
  - max rate with publisher confirms, at most 1000 unconfirmed messages,
  - max rate without confirms,
  - a fixed 10,000 msg/s with confirms (1000 unconfirmed at most), to compare latency.
Every case: 1 producer, 1 consumer, 100-byte messages, one transient classic queue (not
durable: PerfTest declares its queue durable only together with persistent messages, so the
fair pair is transient messages on a transient queue), transient messages (delivery mode 1),
consumer prefetch 1000, manual acknowledgement of every delivery (PerfTest's default, no
multi-ack; brokerbench ack.mode=manual, ack.multiple_every=1).

Both tools run --seconds measured after a 2 s warm-up: brokerbench with warmup=2s, PerfTest
for seconds+2 with its first 2 s of per-second rates left out of its rate. Reports msg/s
(sent, and received by the consumer) and client CPU seconds per million messages: user+sys
of the whole client process (JVM start-up, warm-up and drain included, for both), from the
kernel's rusage of that child alone via wait4, divided by all messages it sent. Medians over
the rounds, and ratios.

Before each run the script waits (up to 2 min) until no other process is connected to the
broker and the host is under 20% busy; each round line shows the host CPU seconds used
during the run by neither the client nor the broker ("others") and names any other process
that connected to the broker meanwhile: on a 2-core machine either skews the figures.

Latency is printed as each tool defines it, and the two are not the same measure:
PerfTest times from the actual send (a timestamp in the body) and takes percentiles from an
exponentially decaying sampled reservoir over the whole run, warm-up included; brokerbench
times from each message's intended send time (so waiting to be sent counts), with full
histograms over the measurement window.

Usage: bench/rabbitmq_perftest.py [--rounds 3] [--seconds 15] [--fixed-rate 10000]
Needs: Java and Maven (PerfTest is resolved from Maven Central with bench/perftest/pom.xml
into <brokerbench home>/perftest/<version>/lib on first use); the managed RabbitMQ is
started if it is not running.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, ROOT, RunFailed, attempt, left_out, perftest_classpath, succeeded,  # noqa: E402
                    summary_problems, tail)

DRIVER = os.path.join(ROOT, "workloads", "drivers", "rabbitmq.yaml")
PERFTEST_VERSION = "2.22.1"
WARMUP_S = 2
MAX_UNCONFIRMED = 1000
PREFETCH = 1000
SIZE = 100


def others_on_broker(port, own_pid=None):
    """Processes other than own_pid with an AMQP connection to the broker's port: {(pid, name)}."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", "(", "dport", "=", f":{port}", ")"],
                         capture_output=True, text=True).stdout
    return {(int(pid), name) for name, pid in re.findall(r'\(\("([^"]*)",pid=(\d+)', out) if int(pid) != own_pid}


def host_busy_jiffies():
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, open("/proc/stat").readline().split()[1:9])
    return user + nice + system + irq + softirq + steal


def process_jiffies(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def wait_quiet(port, limit_s=120):
    """Waits (up to limit_s) until no other client is connected to the broker and the host is
    under 20% busy; returns what was still there when it gave up, or ''."""
    hz, deadline, quiet = os.sysconf("SC_CLK_TCK"), time.time() + limit_s, 0
    while True:
        before = host_busy_jiffies()
        time.sleep(1)
        busy = (host_busy_jiffies() - before) / hz / os.cpu_count()
        others = others_on_broker(port)
        quiet = quiet + 1 if busy < 0.2 and not others else 0
        if quiet >= 3:
            return ""
        if time.time() > deadline:
            return f"started anyway: host {busy:.0%} busy, other broker clients {sorted(others)}"


def timed(cmd, merge=True, watch=None, allowed=(0,)):
    """Runs cmd; returns (stdout [+ stderr], CPU seconds, peak RSS MB, interference, exit code) of
    that child process alone; raises RunFailed when it exits with a code not in `allowed`.
    watch=(broker port, broker pid): interference lists other processes connected to the broker
    during the run and the host CPU seconds used by neither the child nor the broker."""
    hz = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        busy0 = host_busy_jiffies()
        broker0 = process_jiffies(watch[1]) if watch else 0
        child = subprocess.Popen(cmd, stdout=out, stderr=out if merge else err, text=True)
        others, done = set(), threading.Event()

        def sample():
            while watch and not done.wait(0.5):
                others.update(others_on_broker(watch[0], child.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        done.set()
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        other_cpu = (host_busy_jiffies() - busy0 - (process_jiffies(watch[1]) - broker0 if watch else 0)) / hz - cpu
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if child.returncode not in allowed:
        raise RunFailed(f"{os.path.basename(cmd[0])} exited {child.returncode}:\n{tail(errors + text)}")
    interference = {"other_cpu_s": other_cpu, "others": sorted(others)}
    return text, cpu, usage.ru_maxrss / 1024, interference, child.returncode


def broker_up():
    """Starts the managed RabbitMQ if needed; returns (address, broker pid or None)."""
    up = subprocess.run([BIN, "broker", "up", "rabbitmq"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\bat (\S+:\d+)", up)
    pid = re.search(r"\(pid (\d+)", up)
    return (m.group(1) if m else "127.0.0.1:5672"), (int(pid.group(1)) if pid else None)


def latency_us(values, unit):
    """PerfTest prints latencies in µs, or in ms with --use-millis."""
    return [v * 1000 if unit == "ms" else v for v in values]


def perftest_command(address, seconds, confirms, rate, queue_prefix="bench-pt"):
    """PerfTest's command line for the bench's case: one producer and one consumer on a queue
    of their own, SIZE-byte messages for `seconds`, at most MAX_UNCONFIRMED unconfirmed (with
    confirms) and PREFETCH unacknowledged; `rate` msg/s (-r), or as fast as it can (None)."""
    queue = f"{queue_prefix}-{int(time.time() * 1000)}"
    args = ["java", "-cp", perftest_classpath(PERFTEST_VERSION), "com.rabbitmq.perf.PerfTest",
            "-h", f"amqp://guest:guest@{address}", "--id", queue,
            "-x", "1", "-y", "1", "-s", str(SIZE), "-z", str(seconds),
            "-u", queue, "-ad", "true", "-q", str(PREFETCH)]
    if confirms:
        args += ["-c", str(MAX_UNCONFIRMED)]
    if rate:
        args += ["-r", str(rate)]
    return args


def perftest(broker, seconds, confirms, rate):
    """One PerfTest run; returns a result dict."""
    address, watch = broker
    args = perftest_command(address, seconds + WARMUP_S, confirms, rate)
    out, cpu, rss, interference, _ = timed(args, watch=watch)
    # Per-interval lines: "id: X, time 3.005 s, sent: 18686 msg/s, [confirmed: ...,] received: 19009 msg/s, ..."
    intervals = [(float(t), float(s), float(r)) for t, s, r in re.findall(
        r"time:? ([\d.]+) ?s, sent: ([\d.]+) msg/s.*?received: ([\d.]+) msg/s", out)]
    sent_avg = re.search(r"sending rate avg: ([\d.]+) msg/s", out)
    received_avg = re.search(r"receiving rate avg: ([\d.]+) msg/s", out)
    if not sent_avg or not received_avg:
        raise RunFailed(f"PerfTest printed no summary:\n{tail(out)}")
    # The summary rates are totals over the whole run (-z seconds): the messages it sent.
    total_sent = float(sent_avg.group(1)) * (seconds + WARMUP_S)
    # The rate after the warm-up: per-second rates weighted by their interval length.
    measured, previous, sent, received = 0.0, 0.0, 0.0, 0.0
    per_second = []
    for t, s, r in intervals:
        dt = t - previous
        previous = t
        if t - dt >= WARMUP_S - 0.5:
            measured += dt
            sent += s * dt
            received += r * dt
            per_second.append(s)
    if measured >= 1:
        sent_rate, received_rate = sent / measured, received / measured
    else:  # per-second lines not understood: fall back on the whole-run averages
        print("warning: PerfTest per-second lines not parsed; using its whole-run averages", file=sys.stderr)
        sent_rate, received_rate = float(sent_avg.group(1)), float(received_avg.group(1))
        per_second = [sent_rate]
    lat = {}
    for name, key in [("consumer", "end_to_end"), ("confirm", "publish")]:
        m = re.search(name + r" latency min/median/75th/95th/99th ([\d/]+) (\S+)", out)
        if m:
            mn, p50, p75, p95, p99 = latency_us([int(v) for v in m.group(1).split("/")], m.group(2))
            lat[key] = {"p50": p50, "p95": p95, "p99": p99, "max": None}
    return {"sent": sent_rate, "received": received_rate, "cpu": cpu / total_sent * 1e6, "rss": rss,
            "lat": lat, "per_second": (min(per_second), max(per_second)), "note": "", **interference}


def brokerbench(broker, seconds, confirms, rate):
    """One brokerbench run; returns a result dict (with a note of anything its summary flags)."""
    sets = [f"rate={rate or 'max'}", f"message_size={SIZE}B", "producers_per_topic=1", "consumers_per_topic=1",
            f"warmup={WARMUP_S}s", f"duration={seconds}s", "drain_timeout=30s",
            "queue.type=classic", "queue.durable=false", "persistent=false",
            f"confirms.enabled={'true' if confirms else 'false'}", f"confirms.max_outstanding={MAX_UNCONFIRMED}",
            "ack.mode=manual", "ack.multiple_every=1", f"prefetch={PREFETCH}"]
    with tempfile.TemporaryDirectory(prefix="bench-bb-") as tmp:
        args = [BIN, "run", "--driver", DRIVER, "--json", "--quiet", "--out", os.path.join(tmp, "run")]
        for s in sets:
            args += ["--set", s]
        out, cpu, rss, interference, code = timed(args, merge=False, watch=broker[1], allowed=(0, 1))
    try:
        summary = json.loads(out[out.index("{"):])
    except ValueError:
        raise RunFailed(f"brokerbench exited {code} and printed no summary:\n{tail(out)}")
    if code != 0:
        raise RunFailed(f"brokerbench exited {code}: {'; '.join(summary_problems(summary)) or 'see its notes'}")
    total_sent = summary["total"]["sent"]
    if not total_sent:
        raise RunFailed("brokerbench sent nothing")
    lat = {}
    for key in ("publish", "end_to_end"):
        s = summary["latency"][key]
        if s.get("count"):
            lat[key] = {q: s[f"{q}_ns"] / 1000 for q in ("p50", "p95", "p99", "max")}
    problems = summary_problems(summary)
    if summary.get("client_bound"):
        problems.append("client_bound")
    return {"sent": summary["throughput"]["sent_per_s"], "received": summary["throughput"]["received_per_s"],
            "cpu": cpu / total_sent * 1e6, "rss": rss, "lat": lat, "per_second": None,
            "note": ("  [" + ", ".join(problems) + "]") if problems else "", **interference}


def fmt_lat(lat, key):
    if key not in lat:
        return "-"
    v = lat[key]
    parts = [f"p50 {v['p50']:,.0f}", f"p95 {v['p95']:,.0f}", f"p99 {v['p99']:,.0f}"]
    if v["max"] is not None:
        parts.append(f"max {v['max']:,.0f}")
    return " ".join(parts) + " µs"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=15, help="measurement window of each run, after a 2 s warm-up")
    p.add_argument("--fixed-rate", type=int, default=10_000, help="msg/s of the latency case")
    a = p.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "brokerbench"], cwd=ROOT, check=True)
    address, broker_pid = broker_up()
    port = int(address.rsplit(":", 1)[1])
    broker = (address, (port, broker_pid))
    perftest_classpath(PERFTEST_VERSION)
    cases = [("max, confirms", True, None), ("max, no confirms", False, None),
             (f"{a.fixed_rate:,}/s, confirms", True, a.fixed_rate)]
    tools = {"PerfTest": lambda c, r: perftest(broker, a.seconds, c, r),
             "brokerbench": lambda c, r: brokerbench(broker, a.seconds, c, r)}
    results = {(case, tool): [] for case, _, _ in cases for tool in tools}
    print(f"RabbitMQ at {address}; 1 producer, 1 consumer, {SIZE} B, transient messages on a transient classic "
          f"queue, prefetch {PREFETCH}, manual ack of every message, confirms: at most {MAX_UNCONFIRMED} unconfirmed; "
          f"{a.seconds} s measured after {WARMUP_S} s warm-up", flush=True)
    for r in range(a.rounds):
        order = list(tools) if r % 2 == 0 else list(reversed(tools))
        for case, confirms, rate in cases:
            for tool in order:
                waited = wait_quiet(port)
                res = attempt(f"round {r + 1} {case} {tool}", tools[tool], confirms, rate)
                results[(case, tool)].append(res)
                if "failed" in res:
                    continue
                if waited:
                    res["note"] += f"  [{waited}]"
                if res["others"]:
                    res["note"] += f"  [other clients on the broker: {', '.join(f'{n} pid {p}' for p, n in res['others'])}]"
                extra = f"  per-second sent {res['per_second'][0]:,.0f}-{res['per_second'][1]:,.0f}" \
                    if res["per_second"] else ""
                print(f"round {r + 1} {case:20} {tool:12} {res['sent']:10,.0f} sent/s {res['received']:10,.0f} recv/s"
                      f"  {res['cpu']:6.2f} CPU-s/M msgs  {res['rss']:5.0f} MB RSS  others {res['other_cpu_s']:4.1f} CPU-s"
                      f"{extra}{res['note']}", flush=True)

    def med(case, tool, key):
        done = succeeded(results[(case, tool)])
        return statistics.median(x[key] for x in done) if done else float("nan")

    for (case, tool), runs in results.items():
        for line in left_out(f"{case}, {tool}", runs):
            print(line)

    print(f"\nmedians over {a.rounds} rounds, failed runs left out (1 producer, 1 consumer, {SIZE} B, transient, prefetch {PREFETCH}, "
          f"manual ack each message; CPU per message sent, whole client process)")
    for case, _, _ in cases:
        for tool in tools:
            print(f"  {case:20} {tool:12} {med(case, tool, 'sent'):10,.0f} sent/s {med(case, tool, 'received'):10,.0f}"
                  f" recv/s  {med(case, tool, 'cpu'):6.2f} CPU-s per million messages  {med(case, tool, 'rss'):5.0f} MB peak RSS")

    print()
    for case, _, rate in cases:
        bb = {k: med(case, "brokerbench", k) for k in ("sent", "received", "cpu")}
        pt = {k: med(case, "PerfTest", k) for k in ("sent", "received", "cpu")}
        line = (f"brokerbench / PerfTest, {case:20} {bb['received'] / pt['received']:.2f}x msg/s received, "
                f"{bb['sent'] / pt['sent']:.2f}x msg/s sent, {bb['cpu'] / pt['cpu']:.2f}x CPU per message")
        if rate is None:
            met = bb["received"] >= 1.2 * pt["received"] and bb["cpu"] <= 0.5 * pt["cpu"]
            verdict = "n/a: no run of one tool succeeded" if math.isnan(bb["cpu"] + pt["cpu"]) else \
                ("met" if met else "NOT met")
            line += f"  (goal >= 1.2x msg/s at <= 0.5x CPU: {verdict})"
        print(line)

    case = cases[2][0]
    print(f"\nlatency at {case} (per round; NOT the same measure: PerfTest from the actual send, percentiles of a "
          f"decaying sampled reservoir over the whole run incl. warm-up; brokerbench from the intended send time, "
          f"full histogram over the measurement window)")
    for r in range(a.rounds):
        pt, bb = results[(case, "PerfTest")][r], results[(case, "brokerbench")][r]
        if "failed" in pt or "failed" in bb:
            print(f"  round {r + 1}: a run failed (above)")
            continue
        for tool, label, res, key in [
                ("PerfTest", "confirm (actual send -> confirm)", pt, "publish"),
                ("brokerbench", "publish (intended send -> confirm)", bb, "publish"),
                ("PerfTest", "consumer (actual send -> receive)", pt, "end_to_end"),
                ("brokerbench", "end-to-end (intended send -> receive)", bb, "end_to_end")]:
            print(f"  round {r + 1} {tool:12} {label:38} {fmt_lat(res['lat'], key)}")

if __name__ == "__main__":
    main()
