#!/usr/bin/env python3
"""Size of report.html for a real run folder and for a synthesised one-hour run.

The one-hour folder is made from a real results folder (default: a 30 s quickstart run made
here first) by repeating its measurement rows in timeseries.csv, resources.csv and
broker-metrics.csv until they cover 3,600 s, with times shifted, and one 1 s latency spike
per ten minutes (to check that the reduction keeps maxima); manifest, summary and the
histogram logs are copied. Then `brokerbench report` builds both reports. Last, the hour as the
live dashboard sees it while the run goes: no summary and no window.hlog, the per-second
histogram logs stretched to 3,600 intervals too (the page sums the measurement's seconds); the
CPU its build takes is printed (the dashboard builds a page at most once per 100 times that).

Usage: bench/report_size.py [--from RESULTS_FOLDER]
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "brokerbench")


def stretch(src, dst, time_column, scale, seconds=3600, spike=None):
    with open(src) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        shutil.copy(src, dst)
        return
    fields = list(rows[0].keys())
    start = float(rows[0][time_column])
    out = []
    for i in range(seconds):
        row = dict(rows[min(i, len(rows) - 1)] if i < len(rows) else rows[len(rows) // 2 + i % max(1, len(rows) // 2)])
        row[time_column] = repr(start + i * scale) if "." in rows[0][time_column] else str(int(start + i * scale))
        if "second" in row:
            row["second"] = str(i)
        if "phase" in row:
            row["phase"] = "warmup" if i < 5 else ("drain" if i == seconds - 1 else "measurement")
        if spike and i % 600 == 300:
            for c in spike:
                if row.get(c):
                    row[c] = "250000.0"
        out.append(row)
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(out)


def report_size(folder):
    subprocess.run([BIN, "report", folder], check=True, stdout=subprocess.DEVNULL)
    return os.path.getsize(os.path.join(folder, "report.html"))


def stretch_hlog(src, dst, seconds=3600):
    """A per-second histogram log repeated to `seconds` intervals, their start times shifted."""
    with open(src) as f:
        lines = f.read().splitlines()
    head = [line for line in lines if line.startswith(("#", '"'))]
    intervals = [line for line in lines if line and not line.startswith(("#", '"'))]
    out = head[:]
    for i in range(seconds):
        fields = intervals[i % len(intervals)].split(",")
        if fields[0].startswith("Tag="):
            fields[1] = f"{i + 0.5:.3f}"
        else:
            fields[0] = f"{i + 0.5:.3f}"
        out.append(",".join(fields))
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


def build_cpu(folder):
    """CPU seconds of `brokerbench report folder`, less those of a process that does nothing."""
    def cpu(cmd):
        before = os.times()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        after = os.times()
        return (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return min(cpu([BIN, "report", folder]) for _ in range(3)) - min(cpu([BIN, "--version"]) for _ in range(3))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="source")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bb-report-size-")
    source = args.source
    if not source:
        source = os.path.join(tmp, "run-30s")
        subprocess.run([BIN, "run", "--quiet", "--out", source], check=False,
                       stdout=subprocess.DEVNULL)
    print(f"{source}: report.html {report_size(source) / 1e3:.0f} kB")
    hour = os.path.join(tmp, "run-1h")
    os.makedirs(hour)
    for name in os.listdir(source):
        if name.endswith(".hlog") or name in ("manifest.json", "summary.json"):
            shutil.copy(os.path.join(source, name), hour)
    stretch(os.path.join(source, "timeseries.csv"), os.path.join(hour, "timeseries.csv"),
            "time_s", 1.0, spike=["publish_max_us", "publish_p99_us"])
    stretch(os.path.join(source, "resources.csv"), os.path.join(hour, "resources.csv"),
            "time_ns", 1e9)
    if os.path.exists(os.path.join(source, "broker-metrics.csv")):
        stretch(os.path.join(source, "broker-metrics.csv"),
                os.path.join(hour, "broker-metrics.csv"), "time_s", 1.0)
    size = report_size(hour)
    with open(os.path.join(hour, "report.html")) as f:
        kept = f.read().count("250000")
    print(f"synthesised 1-hour run ({hour}): report.html {size / 1e6:.2f} MB; "
          f"the 6 latency spikes of 250 ms appear {kept} times in the reduced data")
    live = os.path.join(tmp, "run-1h-live")
    os.makedirs(live)
    for name in os.listdir(hour):
        if name.endswith((".csv", "manifest.json")):
            shutil.copy(os.path.join(hour, name), live)
    for name in ("publish.hlog", "e2e.hlog"):
        stretch_hlog(os.path.join(source, name), os.path.join(live, name))
    took = build_cpu(live)
    print(f"the same hour while it runs ({live}): a page takes {took:.2f} CPU-s to build, "
          f"so the dashboard builds one every {max(0.9, 100 * took):.0f} s")


if __name__ == "__main__":
    sys.exit(main())
