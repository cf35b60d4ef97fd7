#!/usr/bin/env python3
"""Client cost matrix: brokerbench, the floor, and a peer tool, case by case, in one go.

For every case, one after the other on the same local broker:
  - brokerbench (warmup 0, so every message it sends is in its counts),
  - the floor: a bare client with the same settings and the same pacing and no measuring
    (Kafka: crates/kafka/examples/floor.rs on librdkafka, the library brokerbench uses;
    RabbitMQ: crates/amqp/examples/amqp_floor.rs on brokerbench's own AMQP client; none for NATS),
  - the peer tool where one runs here (Kafka's ProducerPerformance for produce-only Kafka
    cases; RabbitMQ PerfTest 2.22.1 for RabbitMQ cases).
Each is one process; its CPU (user and system, from the kernel's rusage of that child via
wait4, start-up included) is divided by the messages it had acknowledged; and its steady CPU per
message: its CPU per second from 40% to 85% of its life (sampled from /proc) over its msg/s, which
leaves out start-up (seconds of a JVM's CPU, spread over a short run by the whole-process figure). Prints, per case,
msg/s, CPU-s per million messages (user, system, total), peak RSS, and brokerbench's ratio to
the floor and to the peer; --markdown prints the table for docs/src/benchmarks.md; --json FILE keeps all
figures. Rounds alternate the order of the tools; medians over the rounds. Before each tool runs,
the host must be quiet (at most 15% of its CPU busy over a second; up to 30 s of waiting).

Usage: bench/cost_matrix.py [--seconds 10] [--rounds 1] [--cases omb-latency,max-1p,...]
       [--markdown] [--json FILE] [--list] [--quick]
--quick runs one round of 5 s of one fixed-rate case per family (Kafka's quickstart, RabbitMQ and
NATS at 10,000 msg/s): a guard against a regression in client cost, to run before stopping work;
it reports and never fails on a figure.
Needs: scripts/setup done (Java and Maven for the peers); the managed Kafka and RabbitMQ are
started if they are not running.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, ROOT, RunFailed, attempt, brokerbench_summary, kafka_classpath, left_out, median,  # noqa: E402
                    perftest_classpath, settle, succeeded, tail, timed)

FLOOR = os.path.join(ROOT, "target", "release", "examples", "floor")
AMQP_FLOOR = os.path.join(ROOT, "target", "release", "examples", "amqp_floor")
# The RabbitMQ settings of every tool: transient messages on a non-durable classic queue,
# confirms with 1,000 outstanding, a manual ack per delivery, prefetch 1,000 (PerfTest's -c/-q).
RABBITMQ_SETTINGS = ["queue.type=classic", "queue.durable=false", "persistent=false", "confirms.enabled=true",
                     "confirms.max_outstanding=1000", "ack.mode=manual", "ack.multiple_every=1", "prefetch=1000"]
# NATS at max rate: bench/nats_bench.py's settings (nats bench --pubbatch 100 --consumerbatch 100).
NATS_MAX_RATE = ["max_outstanding=100", "pull_batch=100"]
KAFKA = "127.0.0.1:9092"
OMB_LATENCY = {"acks": "all", "linger.ms": "1", "batch.size": "131072"}
MAX_RATE = {"acks": "1", "linger.ms": "5", "batch.size": "1000000"}
PERFTEST_VERSION = "2.22.1"

# name: (family, description, shape). Shape: topics, partitions, producers and consumers per
# topic, message size in bytes, rate (None = max), keys, producer settings, producer clients
# (brokerbench's `producer_clients`, default shared; the floor gets as many clients).
CASES = {
    "omb-latency": ("kafka", "OMB kafka-latency settings, 1 partition, 1p+1c, 100 B, 50,000 msg/s",
                    dict(topics=1, partitions=1, producers=1, consumers=1, size=100, rate=50000, props=OMB_LATENCY)),
    "omb-latency-produce": ("kafka", "same, produce only",
                            dict(topics=1, partitions=1, producers=1, consumers=0, size=100, rate=50000,
                                 props=OMB_LATENCY)),
    "quickstart": ("kafka", "quickstart: acks=1, librdkafka defaults, 1p+1c, 100 B, 50,000 msg/s",
                   dict(topics=1, partitions=1, producers=1, consumers=1, size=100, rate=50000, props={"acks": "1"})),
    "max-1p": ("kafka", "max rate, 1 partition, acks=1, linger.ms=5, batch 1 MB, 100 B, produce only",
               dict(topics=1, partitions=1, producers=1, consumers=0, size=100, rate=None, props=MAX_RATE)),
    "max-16p": ("kafka", "max rate, 16 partitions, same settings",
                dict(topics=1, partitions=16, producers=1, consumers=0, size=100, rate=None, props=MAX_RATE)),
    "max-4x4p": ("kafka", "max rate, 4 producers, 4 partitions, same settings",
                 dict(topics=1, partitions=4, producers=4, consumers=0, size=100, rate=None, props=MAX_RATE)),
    "max-4x4p-per-thread": ("kafka", "same, producer_clients: per_thread (the floor: 4 clients)",
                            dict(topics=1, partitions=4, producers=4, consumers=0, size=100, rate=None,
                                 props=MAX_RATE, clients="per_thread")),
    "max-1kb": ("kafka", "max rate, 1 partition, 1 KB",
                dict(topics=1, partitions=1, producers=1, consumers=0, size=1024, rate=None, props=MAX_RATE)),
    "max-64kb": ("kafka", "max rate, 1 partition, 64 KB",
                 dict(topics=1, partitions=1, producers=1, consumers=0, size=65536, rate=None, props=MAX_RATE)),
    "100-partitions": ("kafka", "100 partitions, 1 producer, no consumer, 1 KB, 10,000 msg/s",
                       dict(topics=1, partitions=100, producers=1, consumers=0, size=1024, rate=10000,
                            props={"acks": "1"})),
    "100p-4x4-keys": ("kafka", "100 partitions, 4p+4c, 1 KB, random keys, 10,000 msg/s",
                      dict(topics=1, partitions=100, producers=4, consumers=4, size=1024, rate=10000,
                           keys="random", props={"acks": "1"})),
    "10-topics": ("kafka", "10 topics x 1 partition, 1p+1c each, 100 B, 10,000 msg/s in all",
                  dict(topics=10, partitions=1, producers=1, consumers=1, size=100, rate=10000,
                       props={"acks": "1"})),
    "100-topics": ("kafka", "100 topics x 1 partition, 1p+1c each, 100 B, 10,000 msg/s in all",
                   dict(topics=100, partitions=1, producers=1, consumers=1, size=100, rate=10000,
                        props={"acks": "1"})),
    "rabbitmq-max": ("rabbitmq", "RabbitMQ, confirms (1000 outstanding), 1 queue, 1p+1c, 100 B, max rate",
                     dict(topics=1, producers=1, consumers=1, size=100, rate=None)),
    "rabbitmq-10k": ("rabbitmq", "RabbitMQ, confirms, 1 queue, 1p+1c, 100 B, 10,000 msg/s",
                     dict(topics=1, producers=1, consumers=1, size=100, rate=10000)),
    "rabbitmq-10q": ("rabbitmq", "RabbitMQ, confirms, 10 queues, 1p+1c each, 100 B, 10,000 msg/s in all",
                     dict(topics=10, producers=1, consumers=1, size=100, rate=10000)),
    "nats-10k": ("nats", "NATS JetStream, file storage, 1 stream, 1p+1c, explicit acks, 100 B, 10,000 msg/s",
                 dict(topics=1, producers=1, consumers=1, size=100, rate=10000)),
    "nats-max": ("nats", "NATS JetStream, same, max rate (100 publishes awaiting a PubAck, pulls of 100)",
                 dict(topics=1, producers=1, consumers=1, size=100, rate=None)),
}
# --quick: one round of 5 s of one fixed-rate case per family, a regression guard to run before
# stopping work (it reports; nothing fails on its figures).
QUICK_CASES = ["quickstart", "rabbitmq-10k", "nats-10k"]


def per_million(usage, messages, msg_per_s):
    """A run's figures: CPU per million messages of the whole process (user, system, total),
    and of its steady middle (`steady`: CPU per second there over the run's msg/s; NaN when
    the run was too short to tell), peak RSS and msg/s."""
    if not messages:
        raise RunFailed(f"no messages acknowledged:\n{tail(usage.text)}")
    scale = 1e6 / messages
    steady = usage.steady_cpu_per_s()
    return {"user": usage.user * scale, "system": usage.system * scale, "cpu": usage.cpu * scale,
            "steady": steady / msg_per_s * 1e6 if steady is not None and msg_per_s else math.nan,
            "rss_mb": usage.rss_mb, "msg_per_s": msg_per_s}


def brokerbench(family, shape, seconds):
    sets = [f"rate={shape['rate'] or 'max'}", f"message_size={shape['size']}B", f"topics={shape['topics']}",
            f"producers_per_topic={shape['producers']}", f"consumers_per_topic={shape['consumers']}",
            "warmup=0s", f"duration={seconds}s", "drain_timeout=30s"]
    args = [BIN, "run", "--json", "--quiet"]
    if family == "kafka":
        sets += [f"partitions_per_topic={shape['partitions']}", f"keys={shape.get('keys', 'none')}",
                 f"bootstrap_servers={KAFKA}", f"producer_clients={shape.get('clients', 'shared')}",
                 *[f"producer_config.{k}={v}" for k, v in shape["props"].items()]]
    elif family == "nats":
        args += ["--driver", os.path.join(ROOT, "workloads", "drivers", "nats.yaml")]
        sets += NATS_MAX_RATE if shape["rate"] is None else []
    else:
        args += ["--driver", os.path.join(ROOT, "workloads", "drivers", "rabbitmq.yaml")]
        sets += RABBITMQ_SETTINGS
    with tempfile.TemporaryDirectory(prefix="cost-bb-") as tmp:
        for s in sets:
            args += ["--set", s]
        usage = timed(args + ["--out", os.path.join(tmp, "run")], merge=False, allowed=(0, 1))
    summary = brokerbench_summary(usage)
    result = per_million(usage, summary["total"]["acknowledged"], summary["throughput"]["acknowledged_per_s"])
    flags = [k for k in ("lost", "duplicated") if summary.get("integrity", {}).get(k)]
    if summary.get("client_bound"):
        flags.append("client-bound")
    if summary.get("status") != "complete":
        flags.append(str(summary.get("status")))
    result["note"] = ", ".join(flags)
    return result


def floor(shape, seconds):
    args = [FLOOR, KAFKA, "--create", f"{shape['topics']}:{shape['partitions']}",
            "--rate", str(shape["rate"] or "max"), "--seconds", str(seconds), "--size", str(shape["size"]),
            "--producers", str(shape["producers"] * shape["topics"]),
            "--consumers", str(shape["consumers"]),
            "--keys", shape.get("keys", "none"),
            "--clients", "4" if shape.get("clients") == "per_thread" else "1"]
    for k, v in shape["props"].items():
        args += ["-P", f"{k}={v}"]
    usage = timed(args)
    fields = dict(re.findall(r"(\w+)=([\d.]+)", usage.text))
    result = per_million(usage, int(fields["delivered"]), float(fields["msg_per_s"]))
    result["note"] = "" if shape["consumers"] == 0 or fields["consumed"] == fields["delivered"] else \
        f"consumed {fields['consumed']} of {fields['delivered']}"
    return result


def amqp_floor(shape, seconds):
    args = [AMQP_FLOOR, "amqp://guest:guest@127.0.0.1:5672/%2f", "--topics", str(shape["topics"]),
            "--rate", str(shape["rate"] or "max"), "--seconds", str(seconds), "--size", str(shape["size"]),
            "--consumers", str(shape["consumers"]), "--max-outstanding", "1000"]
    for setting in RABBITMQ_SETTINGS:
        args += ["-D", setting]
    usage = timed(args)
    fields = dict(re.findall(r"(\w+)=([\d.]+)", usage.text))
    if "delivered" not in fields:
        raise RunFailed(f"amqp_floor printed no counts:\n{tail(usage.text)}")
    result = per_million(usage, int(fields["delivered"]), float(fields["msg_per_s"]))
    result["note"] = "" if shape["consumers"] == 0 or fields["consumed"] == fields["delivered"] else \
        f"consumed {fields['consumed']} of {fields['delivered']}"
    return result


def topic_command(*args):
    subprocess.run(["java", "-cp", kafka_classpath(), "org.apache.kafka.tools.TopicCommand",
                    "--bootstrap-server", KAFKA, *args], check=True, capture_output=True)


def remove_leftover_topics():
    """Topics of an interrupted earlier run of this script (ProducerPerformance's, the floor's)
    would hold their data on the broker's disk for good: at max rate, gigabytes a run."""
    listed = subprocess.run(["java", "-cp", kafka_classpath(), "org.apache.kafka.tools.TopicCommand",
                             "--bootstrap-server", KAFKA, "--list"], capture_output=True, text=True)
    leftovers = [t for t in listed.stdout.split() if t.startswith(("cost-pp-", "floor-"))]
    for topic in leftovers:
        print(f"deleting topic {topic}, left by an interrupted run", file=sys.stderr)
        topic_command("--delete", "--topic", topic)


def producer_performance(shape, seconds, rate_hint):
    """ProducerPerformance sends a number of records, not for a time: at max rate, as many as
    brokerbench acknowledged in its run of the same case (rate_hint msg/s)."""
    if not (shape["rate"] or rate_hint):
        raise RunFailed("no brokerbench rate to match at max rate (its run failed)")
    topic = f"cost-pp-{int(time.time() * 1000)}"
    topic_command("--create", "--topic", topic, "--partitions", str(shape["partitions"]),
                  "--replication-factor", "1")
    records = int((shape["rate"] or rate_hint) * seconds)
    try:
        usage = timed(["java", "-Xms1g", "-Xmx1g", "-cp", kafka_classpath(),
                       "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                       "--num-records", str(records), "--record-size", str(shape["size"]),
                       "--throughput", str(shape["rate"] or -1), "--producer-props", f"bootstrap.servers={KAFKA}",
                       *[f"{k}={v}" for k, v in shape["props"].items()]])
    finally:
        topic_command("--delete", "--topic", topic)
    last = [line for line in usage.text.splitlines() if "records sent" in line][-1]
    result = per_million(usage, int(re.search(r"(\d+) records sent", last).group(1)),
                         float(re.search(r"([\d.]+) records/sec", last).group(1)))
    result["note"] = ""
    return result


def perftest(shape, seconds):
    queues = shape["topics"]
    name = f"cost-pt-{int(time.time() * 1000)}"
    args = ["java", "-cp", perftest_classpath(PERFTEST_VERSION), "com.rabbitmq.perf.PerfTest", "-h", "amqp://guest:guest@127.0.0.1:5672",
            "-x", str(queues), "-y", str(queues), "-s", str(shape["size"]), "-z", str(seconds),
            "-c", "1000", "-q", "1000", "-ad", "true"]
    if queues == 1:
        args += ["-u", name]
    else:
        args += ["--queue-pattern", name + "-%d", "--queue-pattern-from", "1", "--queue-pattern-to", str(queues)]
    if shape["rate"]:
        args += ["-r", str(shape["rate"] / queues)]
    usage = timed(args)
    sent = re.search(r"sending rate avg: ([\d.]+) msg/s", usage.text)
    if not sent:
        raise RunFailed(f"PerfTest printed no summary:\n{tail(usage.text)}")
    rate = float(sent.group(1))
    result = per_million(usage, rate * seconds, rate)
    result["note"] = ""
    return result


def tools_for(family, shape):
    hint = {}

    def brokerbench_run(seconds):
        result = brokerbench(family, shape, seconds)
        hint["msg_per_s"] = result["msg_per_s"]
        return result

    tools = {"brokerbench": brokerbench_run}
    if family == "nats":
        return tools  # no floor here; nats bench at max rate: bench/nats_bench.py
    if family == "kafka":
        tools["floor"] = lambda s: floor(shape, s)
        if shape["consumers"] == 0 and shape["producers"] == 1 and shape["topics"] == 1:
            tools["peer"] = lambda s: producer_performance(shape, s, hint.get("msg_per_s"))
    else:
        tools["floor"] = lambda s: amqp_floor(shape, s)
        tools["peer"] = lambda s: perftest(shape, s)
    return tools


def median_result(results):
    """The medians of the runs that did not fail; None when every one failed."""
    done = succeeded(results)
    if not done:
        return None
    keys = ("user", "system", "cpu", "steady", "rss_mb", "msg_per_s")
    merged = {k: median([r[k] for r in done]) for k in keys}
    merged["note"] = "; ".join(sorted({r["note"] for r in done if r["note"]}))
    if len(done) < len(results):
        merged["note"] = "; ".join(filter(None, [merged["note"], f"{len(results) - len(done)} failed run(s) left out"]))
    return merged


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated case names (see --list)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--quick", action="store_true",
                   help=f"one round of 5 s of {', '.join(QUICK_CASES)}: a regression guard, not figures to quote")
    a = p.parse_args()
    if a.quick:
        a.cases, a.seconds, a.rounds = ",".join(QUICK_CASES), 5, 1
    if a.list:
        for name, (family, text, _) in CASES.items():
            print(f"{name:22} {family:9} {text}")
        return
    names = a.cases.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}: see --list")
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "brokerbench", "--example", "floor",
                    "--example", "amqp_floor", "-p", "brokerbench-kafka", "-p", "brokerbench-amqp",
                    "-p", "brokerbench"], cwd=ROOT, check=True)
    families = {CASES[n][0] for n in names}
    for family in sorted(families):
        subprocess.run([BIN, "broker", "up", family], check=True, stdout=subprocess.DEVNULL)
    if "kafka" in families:
        remove_leftover_topics()
    table = {}
    for name in names:
        family, text, shape = CASES[name]
        tools = tools_for(family, shape)
        runs = {tool: [] for tool in tools}
        for r in range(a.rounds):
            # Rounds alternate the order, but brokerbench always runs before the peer in the
            # first round (the peer's message count at max rate follows brokerbench's rate).
            order = list(tools) if r % 2 == 0 else list(reversed(tools))
            for tool in order:
                settle()
                runs[tool].append(attempt(f"{name} round {r + 1} {tool}", tools[tool], a.seconds))
                x = runs[tool][-1]
                if "failed" not in x:
                    print(f"{name:20} round {r + 1} {tool:11} {x['msg_per_s']:11,.0f} msg/s {x['cpu']:7.2f} CPU-s/M "
                          f"(user {x['user']:.2f}, sys {x['system']:.2f}; steady {x['steady']:.2f}) "
                          f"{x['rss_mb']:6.0f} MB {x['note']}",
                          file=sys.stderr, flush=True)
        failures = [line for tool, v in runs.items() for line in left_out(f"{name} {tool}", v)]
        table[name] = {tool: median_result(v) for tool, v in runs.items()}
        table[name]["left out"] = failures
    print_table(table, a.markdown, a.rounds, a.seconds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(without_nan({"seconds": a.seconds, "rounds": a.rounds, "cases": table}), f, indent=1)


def without_nan(value):
    """`value` with NaN (a figure a run could not give) as null, which JSON has."""
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def ratio(row, tool, key="cpu"):
    mine, other = row.get("brokerbench"), row.get(tool)
    if not (mine and other and other[key]) or math.isnan(mine[key] / other[key]):
        return "-"
    return f"{mine[key] / other[key]:.2f}x"


def print_table(table, markdown, rounds, seconds):
    head = ["case", "tool", "msg/s", "user", "system", "CPU-s/M", "steady", "RSS MB", "bb/floor", "bb/peer",
            "steady bb/peer", "note"]
    rows, left = [], []
    for name, row in table.items():
        left += row["left out"]
        for tool, x in row.items():
            first = tool == "brokerbench"
            if tool == "left out":
                continue
            if x is None:
                rows.append([name if first else "", tool] + ["-"] * 9 + ["every run failed"])
                continue
            rows.append([name if first else "", tool, f"{x['msg_per_s']:,.0f}", f"{x['user']:.2f}",
                         f"{x['system']:.2f}", f"{x['cpu']:.2f}", f"{x['steady']:.2f}", f"{x['rss_mb']:.0f}",
                         ratio(row, "floor") if first else "", ratio(row, "peer") if first else "",
                         ratio(row, "peer", "steady") if first else "", x["note"]])
    print(f"\nclient CPU seconds per million acknowledged messages, medians of {rounds} round(s) of {seconds} s"
          "\n(CPU-s/M: the whole process, start-up included; steady: its CPU per second from 40% to 85% of its"
          " life over its msg/s)")
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        for line in left:
            print(f"\n{line}")
        return
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    for line in left:
        print(line)


if __name__ == "__main__":
    main()
