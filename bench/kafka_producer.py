#!/usr/bin/env python3
"""Side-by-side producer benchmark against one local Kafka, in one go.

Runs, alternating, ROUNDS rounds of:
  - Kafka's own ProducerPerformance (kafka-tools jar from the managed install),
  - brokerbench at max rate (produce only),
  - a bare librdkafka send loop (crates/kafka/examples/floor.rs at max rate: no measuring at all),
all with 100-byte messages, 1 partition, acks=1 and the same batch.size / linger.ms.
Reports msg/s and client CPU seconds per million messages (user+sys of the whole client
process, from the kernel's rusage of that child alone, via wait4), medians over the rounds, and ratios.

Usage: bench/kafka_producer.py [--rounds 3] [--seconds 10] [--batch-size 1000000] [--linger-ms 5]
Needs: scripts/setup done; the managed Kafka is started if it is not running.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, ROOT, kafka_classpath as java_cp, timed_cpu as timed  # noqa: E402

BARE = os.path.join(ROOT, "target", "release", "examples", "floor")
BOOTSTRAP = "127.0.0.1:9092"


def create_topic(name):
    subprocess.run(
        ["java", "-cp", java_cp(), "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", BOOTSTRAP,
         "--create", "--if-not-exists", "--topic", name, "--partitions", "1", "--replication-factor", "1"],
        check=True, capture_output=True)


def delete_topic(name):
    subprocess.run(
        ["java", "-cp", java_cp(), "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", BOOTSTRAP,
         "--delete", "--topic", name], capture_output=True)


def producer_performance(records, props):
    topic = f"bench-pp-{int(time.time() * 1000)}"
    create_topic(topic)
    out, cpu, rss = timed(
        ["java", "-Xms1g", "-Xmx1g", "-cp", java_cp(), "org.apache.kafka.tools.ProducerPerformance",
         "--topic", topic, "--num-records", str(records), "--record-size", "100", "--throughput", "-1",
         "--producer-props", f"bootstrap.servers={BOOTSTRAP}", *[f"{k}={v}" for k, v in props.items()]])
    delete_topic(topic)
    last = [l for l in out.splitlines() if "records sent" in l][-1]
    rate = float(re.search(r"([\d.]+) records/sec", last).group(1))
    sent = int(re.search(r"(\d+) records sent", last).group(1))
    return rate, cpu / sent * 1e6, rss


def brokerbench(seconds, props):
    import json
    sets = ["rate=max", "consumers_per_topic=0", "message_size=100B", "partitions_per_topic=1",
            "warmup=2s", f"duration={seconds}s", "drain_timeout=30s",
            f"bootstrap_servers={BOOTSTRAP}", *[f"producer_config.{k}={v}" for k, v in props.items()]]
    args = [BIN, "run", "--json", "--quiet", "--out", f"/tmp/bench-bb-{int(time.time() * 1000)}"]
    for s in sets:
        args += ["--set", s]
    out, cpu, rss = timed(args)
    summary = json.loads(out[out.index("{"):])
    total = summary["total"]["acknowledged"]
    return summary["throughput"]["acknowledged_per_s"], cpu / total * 1e6, rss


def bare(seconds, props):
    out, cpu, rss = timed([BARE, BOOTSTRAP, "--create", "1:1", "--rate", "max", "--seconds", str(seconds),
                           "--size", "100", *[a for k, v in props.items() for a in ("-P", f"{k}={v}")]])
    rate = float(re.search(r"msg_per_s=([\d.]+)", out).group(1))
    sent = int(re.search(r"delivered=(\d+)", out).group(1))
    return rate, cpu / sent * 1e6, rss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=10, help="brokerbench measurement window")
    p.add_argument("--records", type=int, default=8_000_000, help="messages per ProducerPerformance run")
    p.add_argument("--batch-size", default="1000000")
    p.add_argument("--linger-ms", default="5")
    a = p.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "brokerbench",
                    "--example", "floor", "-p", "brokerbench-kafka", "-p", "brokerbench"], cwd=ROOT, check=True)
    subprocess.run([BIN, "broker", "up", "kafka"], check=True, stdout=subprocess.DEVNULL)
    props = {"acks": "1", "batch.size": a.batch_size, "linger.ms": a.linger_ms}
    results = {"ProducerPerformance": [], "brokerbench": [], "bare librdkafka": []}
    for r in range(a.rounds):
        for name, fn in [("ProducerPerformance", lambda: producer_performance(a.records, props)),
                         ("brokerbench", lambda: brokerbench(a.seconds, props)),
                         ("bare librdkafka", lambda: bare(a.seconds, props))]:
            rate, cpu_per_m, rss = fn()
            results[name].append((rate, cpu_per_m, rss))
            print(f"round {r + 1} {name:20} {rate:12,.0f} msg/s  {cpu_per_m:6.2f} CPU-s/M msgs  {rss:6.0f} MB RSS",
                  flush=True)
    med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in results.items()}
    print(f"\nmedians over {a.rounds} rounds (100 B, 1 partition, acks=1, batch.size={a.batch_size}, linger.ms={a.linger_ms})")
    for k, (rate, cpu, rss) in med.items():
        print(f"  {k:20} {rate:12,.0f} msg/s  {cpu:6.2f} CPU-s per million messages  {rss:6.0f} MB peak RSS")
    bb, pp, bare_ = med["brokerbench"], med["ProducerPerformance"], med["bare librdkafka"]
    print(f"\nbrokerbench / ProducerPerformance: {bb[0] / pp[0]:.2f}x msg/s, {bb[1] / pp[1]:.2f}x CPU per message")
    print(f"brokerbench / bare librdkafka:     {bb[0] / bare_[0]:.2f}x msg/s, {bb[1] / bare_[1]:.2f}x CPU per message")


if __name__ == "__main__":
    main()
