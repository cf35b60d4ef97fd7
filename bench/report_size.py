#!/usr/bin/env python3
"""Size of report.html for a real run folder and for a synthesised one-hour run.

The one-hour folder is made from a real results folder (default: a 30 s quickstart run made
here first) by repeating its measurement rows in timeseries.csv, resources.csv and
broker-metrics.csv until they cover 3,600 s, with times shifted, and one 1 s latency spike
per ten minutes (to check that the reduction keeps maxima); manifest, summary and the
histogram logs are copied. Then `brokerbench report` builds both reports.

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


if __name__ == "__main__":
    sys.exit(main())
