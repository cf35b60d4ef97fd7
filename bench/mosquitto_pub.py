#!/usr/bin/env python3
"""Side-by-side benchmark with Eclipse Mosquitto's own mosquitto_pub and mosquitto_sub on one managed mosquitto, in one go.

(The issue named `mqtt-benchmark`, github.com/krylovsk/mqtt-benchmark; this machine's Go module
proxy refuses it, every version and fork tried. mosquitto_pub and mosquitto_sub are the C clients
of libmosquitto, from Debian's mosquitto-clients, which scripts/setup installs.)

Cases: 100-byte messages at QoS 1 over MQTT 5, one publisher and one subscriber, each message
acknowledged (PUBACK) both ways:
- the maximum rate: mosquitto_pub --repeat N -M 1000 (up to 1,000 in flight), brokerbench
  rate=max (max_outstanding 1000);
- paced at 2,000 msg/s: mosquitto_pub --repeat-delay 0.0005 (its own pacing: it waits that long
  after each send, so it sends somewhat slower), brokerbench rate=2000.

Rates: brokerbench's received rate over its measurement window (after a 2 s warm-up, --seconds
long); the mosquitto tools' messages over the time from the publisher's start until the
subscriber has received all of them (mosquitto_sub -C N). Client CPU is user+sys from wait4: the
whole brokerbench process, and mosquitto_pub plus mosquitto_sub; per message received. Rounds
alternate which tool goes first; medians over the rounds, and ratios brokerbench / mosquitto.

Usage: bench/mosquitto_pub.py [--rounds 3] [--seconds 10]
Needs: mosquitto_pub and mosquitto_sub; the managed mosquitto is started if it is not running.
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, RunFailed, attempt, left_out, settle, succeeded, summary_problems, tail, timed  # noqa: E402

SIZE = 100
WARMUP = 2
# Messages per second of run each case sends the mosquitto tools, from one run of each here
# (about 25,000/s at the maximum rate; 1,800/s with a 0.5 ms pause after each send).
EXPECTED = {"max": 25_000, 2000: 1_800}
DELAY = {"max": None, 2000: 0.0005}


def brokerbench(rate, seconds):
    out = tempfile.mkdtemp(prefix="bb-mqtt-bench-")
    shutil.rmtree(out)
    cmd = [BIN, "run", "--quiet", "--no-monitor", "--out", out,
           "--set", "driver=mqtt", "--set", f"rate={rate}", "--set", f"message_size={SIZE}B",
           "--set", f"warmup={WARMUP}s", "--set", f"duration={seconds}s", "--set", "qos=1"]
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
    received = s["total"]["received"]
    return {"rate": s["throughput"]["received_per_s"],
            "cpu_per_m": usage.cpu / received * 1e6, "rss": usage.rss_mb, "msgs": received}


def mosquitto_tools(port, rate, seconds):
    count = EXPECTED[rate] * seconds
    topic = f"brokerbench-mosquitto-pub/{os.getpid()}/{time.monotonic_ns()}"
    common = ["-p", str(port), "-q", "1", "-V", "mqttv5", "-t", topic]
    with tempfile.TemporaryFile() as sink:
        sub = subprocess.Popen(["mosquitto_sub", *common, "-C", str(count), "-W", str(seconds * 10)],
                               stdout=sink, stderr=subprocess.STDOUT)
        time.sleep(0.5)
        pub = ["mosquitto_pub", *common, "-M", "1000", "--repeat", str(count), "-m", "x" * SIZE]
        if DELAY[rate]:
            pub += ["--repeat-delay", str(DELAY[rate])]
        started = time.monotonic()
        published = timed(pub)
        _, status, usage = os.wait4(sub.pid, 0)
        elapsed = time.monotonic() - started
        if os.waitstatus_to_exitcode(status) != 0:
            sink.seek(0)
            raise RunFailed(f"mosquitto_sub exited {os.waitstatus_to_exitcode(status)} before {count:,} messages:\n"
                            f"{tail(sink.read().decode(errors='replace'))}")
    cpu = published.cpu + usage.ru_utime + usage.ru_stime
    rss = max(published.rss_mb, usage.ru_maxrss / 1024)
    return {"rate": count / elapsed, "cpu_per_m": cpu / count * 1e6, "rss": rss, "msgs": count}


def compare(case, rate, args, port):
    results = {"brokerbench": [], "mosquitto": []}
    for r in range(args.rounds):
        order = ["brokerbench", "mosquitto"] if r % 2 else ["mosquitto", "brokerbench"]
        for tool in order:
            settle()
            label = f"{case} round {r + 1} {tool}"
            res = (attempt(label, brokerbench, rate, args.seconds) if tool == "brokerbench"
                   else attempt(label, mosquitto_tools, port, rate, args.seconds))
            results[tool].append(res)
            if "failed" not in res:
                print(f"{label:40} {res['rate']:>9,.0f} msg/s  {res['cpu_per_m']:7.2f} CPU-s/M  "
                      f"RSS {res['rss']:.0f} MB  ({res['msgs']:,} msgs)", flush=True)
    for tool, runs in results.items():
        for line in left_out(f"{case} {tool}", runs):
            print(line)
    if not all(succeeded(v) for v in results.values()):
        print(f"{case}: no ratios, every run of a tool failed")
        return
    med = {t: {k: statistics.median(x[k] for x in succeeded(v)) for k in ("rate", "cpu_per_m", "rss")}
           for t, v in results.items()}
    b, p = med["brokerbench"], med["mosquitto"]
    print(f"{case} medians: brokerbench {b['rate']:,.0f} msg/s, {b['cpu_per_m']:.2f} CPU-s/M, RSS {b['rss']:.0f} MB; "
          f"mosquitto_pub+sub {p['rate']:,.0f} msg/s, {p['cpu_per_m']:.2f} CPU-s/M, RSS {p['rss']:.0f} MB")
    print(f"{case} ratios (brokerbench / mosquitto_pub+sub): rate {b['rate'] / p['rate']:.2f}x, "
          f"CPU per message {b['cpu_per_m'] / p['cpu_per_m']:.2f}x\n", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    for tool in ("mosquitto_pub", "mosquitto_sub"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: install Debian's mosquitto-clients (scripts/setup does)")
    up = subprocess.run([BIN, "broker", "up", "mqtt"], capture_output=True, text=True, check=True).stdout
    port = int(re.search(r"127\.0\.0\.1:(\d+)", up).group(1))
    compare("maximum rate", "max", args, port)
    compare("2,000 msg/s", 2000, args, port)


if __name__ == "__main__":
    main()
