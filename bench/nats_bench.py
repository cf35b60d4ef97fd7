#!/usr/bin/env python3
"""Side-by-side benchmark with the NATS CLI's `nats bench` on one managed nats-server, in one go.

Case: JetStream publish with acknowledgements and one consumer, 100-byte messages, file
storage, one publisher and one shared durable pull consumer with explicit acks. Both tools
keep at most PUBBATCH publishes awaiting their PubAck (nats bench --pubbatch; brokerbench
max_outstanding) and pull CONSUMERBATCH messages at a time (nats bench --consumerbatch;
brokerbench pull_batch), at the maximum rate.

nats bench publishes --msgs messages (as many as brokerbench sent in the same round, so both
move the same volume); brokerbench runs 1 s of warm-up and --seconds measured.

--pubsleep D (e.g. 80us) compares at a fixed rate instead: nats bench has no target rate, only a
sleep after each publish, so it goes first in every round, publishing --seconds worth of
messages at the rate its sleep gives (the last round's, or 6,000 msg/s in the first), and
brokerbench then runs at the rate nats bench reached, on its open-loop schedule. Rates are
each tool's own: nats bench's "Pub stats" and "Sub stats" lines; brokerbench's acknowledged
and received rates over its measurement window. Client CPU is user+sys of the whole child process from wait4 (start-up, stream
setup and drain included, for both), divided by the messages it published; and steady: its CPU per
second from 40% to 85% of its life (sampled from /proc) over its publish rate, without start-up. Rounds alternate
which tool goes first; medians over the rounds, and ratios brokerbench / nats bench.

With bench/async_nats built (`cargo build --release --manifest-path bench/async_nats/Cargo.toml`,
the official Rust client async-nats on tokio), each round also runs the same case on it, with
the same message count: the measurement behind writing brokerbench's own NATS client rather
than driving async-nats.

Usage: bench/nats_bench.py [--rounds 3] [--seconds 10] [--pubsleep 80us] [--nats /path/to/nats]
Needs: the NATS CLI (`GOBIN=/tmp/gobin go install github.com/nats-io/natscli/nats@v0.1.5`,
from the Go module proxy); the managed nats-server is started if it is not running.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, ROOT, RunFailed, attempt, left_out, median, succeeded, summary_problems, tail, timed  # noqa: E402

SIZE = 100
PUBBATCH = 100
CONSUMERBATCH = 100


def rate_of(text, label):
    m = re.search(rf"{label} stats: ([\d,]+) msgs/sec", text)
    if not m:
        raise RunFailed(f"no '{label} stats' in nats bench output: {text[-500:]}")
    return float(m.group(1).replace(",", ""))


def brokerbench(seconds, rate=None):
    out = tempfile.mkdtemp(prefix="bb-nats-bench-")
    shutil.rmtree(out)
    cmd = [BIN, "run", "--quiet", "--no-monitor", "--out", out,
           "--set", "driver=nats", "--set", f"rate={round(rate) if rate else 'max'}",
           "--set", f"message_size={SIZE}B",
           "--set", "warmup=1s", "--set", f"duration={seconds}s",
           "--set", f"max_outstanding={PUBBATCH}", "--set", f"pull_batch={CONSUMERBATCH}"]
    usage = timed(cmd, allowed=(0, 1))
    try:
        s = json.load(open(os.path.join(out, "summary.json")))
    except (OSError, ValueError):
        raise RunFailed(f"brokerbench exited {usage.code} and wrote no readable summary.json:\n{tail(usage.text)}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    sent = s["total"]["sent"]
    problems = summary_problems(s)
    if s["total"]["received"] != sent:
        problems.append(f"received {s['total']['received']:,} of {sent:,}")
    if usage.code != 0 or problems:
        raise RunFailed(f"brokerbench exited {usage.code}: {'; '.join(problems) or 'see its notes'}")
    pub = s["throughput"]["acknowledged_per_s"]
    return {"pub": pub, "sub": s["throughput"]["received_per_s"],
            "cpu_per_m": usage.cpu / sent * 1e6, "steady_per_m": steady_per_m(usage, pub),
            "rss": usage.rss_mb, "msgs": sent}


def steady_per_m(usage, pub):
    """CPU seconds per million messages in the steady middle of a run (its CPU per second from
    40% to 85% of its life over its publish rate); NaN when the run was too short to tell."""
    steady = usage.steady_cpu_per_s()
    return steady / pub * 1e6 if steady is not None and pub else math.nan


def nats_bench_command(nats, url, msgs, pubsleep=None):
    """The `nats bench` command of this case (after removing a stream an earlier run left, with
    other subjects, which makes nats bench refuse to start)."""
    cmd = [nats, "bench", "-s", url, "brokerbench-bench", "--js", "--purge", "--pub", "1",
           "--sub", "1", "--pull", "--msgs", str(msgs), "--size", str(SIZE), "--no-progress",
           "--pubbatch", str(PUBBATCH), "--consumerbatch", str(CONSUMERBATCH)]
    if pubsleep:
        cmd += ["--pubsleep", pubsleep]
    subprocess.run([nats, "stream", "rm", "benchstream", "-f", "-s", url], capture_output=True)
    return cmd


def nats_bench(nats, url, msgs, pubsleep=None):
    usage = timed(nats_bench_command(nats, url, msgs, pubsleep))
    pub = rate_of(usage.text, " Pub")
    return {"pub": pub, "sub": rate_of(usage.text, " Sub"), "cpu_per_m": usage.cpu / msgs * 1e6,
            "steady_per_m": steady_per_m(usage, pub), "rss": usage.rss_mb, "msgs": msgs}


ASYNC_NATS = os.path.join(ROOT, "bench", "async_nats", "target", "release", "async-nats-bench")


def async_nats(url, msgs):
    usage = timed([ASYNC_NATS, url, str(msgs), str(SIZE), str(PUBBATCH), str(CONSUMERBATCH)])
    result = json.loads(usage.text.strip().splitlines()[-1])
    return {"pub": result["pub_per_s"], "sub": result["sub_per_s"], "cpu_per_m": usage.cpu / msgs * 1e6,
            "steady_per_m": steady_per_m(usage, result["pub_per_s"]), "rss": usage.rss_mb, "msgs": msgs}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--pubsleep", help="compare at the rate nats bench reaches with this sleep after each publish (e.g. 80us)")
    parser.add_argument("--nats", default=shutil.which("nats") or "/tmp/gobin/nats")
    args = parser.parse_args()
    if not os.path.exists(args.nats):
        sys.exit(f"no NATS CLI at {args.nats}: GOBIN=/tmp/gobin go install github.com/nats-io/natscli/nats@v0.1.5")
    up = subprocess.run([BIN, "broker", "up", "nats"], capture_output=True, text=True, check=True).stdout
    url = "nats://" + re.search(r"127\.0\.0\.1:\d+", up).group(0)
    results = {"brokerbench": [], "nats bench": []}
    if os.path.exists(ASYNC_NATS):
        results["async-nats"] = []
    paced_rate = 6000.0
    for r in range(args.rounds):
        order = ["brokerbench", "nats bench"] if r % 2 and not args.pubsleep else ["nats bench", "brokerbench"]
        if "async-nats" in results and not args.pubsleep:
            order.append("async-nats")
        msgs = None
        round_results = {}
        # nats bench publishes as many messages as brokerbench did; in a round where it goes
        # first, it uses the previous round's count (or 10 s at 60k msg/s).
        # A failed brokerbench run gives no count: the latest good one (or 10 s at 60k msg/s).
        # Paced (--pubsleep), nats bench goes first with --seconds worth at its last rate, and
        # brokerbench follows at the rate it reached.
        for tool in order:
            count = msgs or next((x["msgs"] for x in reversed(succeeded(results["brokerbench"]))),
                                 60000 * args.seconds)
            if tool == "brokerbench":
                rate = paced_rate if args.pubsleep else None
                round_results[tool] = attempt(f"round {r + 1} {tool}", brokerbench, args.seconds, rate)
                msgs = msgs or round_results[tool].get("msgs")
            elif tool == "async-nats":
                round_results[tool] = attempt(f"round {r + 1} {tool}", async_nats, url, count)
            elif args.pubsleep:
                count = round(paced_rate * args.seconds)
                round_results[tool] = attempt(f"round {r + 1} {tool}", nats_bench, args.nats, url, count,
                                              args.pubsleep)
                paced_rate = round_results[tool].get("pub", paced_rate)
                msgs = count
            else:
                round_results[tool] = attempt(f"round {r + 1} {tool}", nats_bench, args.nats, url, count)
        for tool, res in round_results.items():
            results[tool].append(res)
            if "failed" not in res:
                print(f"round {r + 1} {tool:12} pub {res['pub']:>9,.0f} msg/s  sub {res['sub']:>9,.0f} msg/s  "
                      f"{res['cpu_per_m']:6.2f} CPU-s/M (steady {res['steady_per_m']:.2f})  RSS {res['rss']:.0f} MB  ({res['msgs']:,} msgs)", flush=True)
    for tool, runs in results.items():
        for line in left_out(tool, runs):
            print(line)
    failed = [t for t in ("brokerbench", "nats bench") if not succeeded(results[t])]
    if failed:
        sys.exit(f"no medians: every run of {' and '.join(failed)} failed")
    med = {t: {k: median([x[k] for x in succeeded(v)]) for k in ("pub", "sub", "cpu_per_m", "steady_per_m", "rss")}
           for t, v in results.items() if succeeded(v)}
    b, n = med["brokerbench"], med["nats bench"]
    print(f"\nmedians: brokerbench pub {b['pub']:,.0f} msg/s, {b['cpu_per_m']:.2f} CPU-s/M, RSS {b['rss']:.0f} MB; "
          f"nats bench pub {n['pub']:,.0f} msg/s, {n['cpu_per_m']:.2f} CPU-s/M, RSS {n['rss']:.0f} MB")
    print(f"ratios (brokerbench / nats bench): publish rate {b['pub'] / n['pub']:.2f}x, "
          f"CPU per message {b['cpu_per_m'] / n['cpu_per_m']:.2f}x, steady CPU per message "
          f"{b['steady_per_m']:.2f} / {n['steady_per_m']:.2f} = {b['steady_per_m'] / n['steady_per_m']:.2f}x")
    if "async-nats" in med:
        a = med["async-nats"]
        print(f"async-nats: pub {a['pub']:,.0f} msg/s, {a['cpu_per_m']:.2f} CPU-s/M, RSS {a['rss']:.0f} MB; "
              f"ratios (brokerbench / async-nats): publish rate {b['pub'] / a['pub']:.2f}x, "
              f"CPU per message {b['cpu_per_m'] / a['cpu_per_m']:.2f}x")


if __name__ == "__main__":
    main()
