"""Helpers shared by the side-by-side benchmarks in bench/."""

import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "brokerbench")


def home():
    """brokerbench's data folder (managed brokers, peer tools' jars)."""
    if os.environ.get("BROKERBENCH_HOME"):
        return os.environ["BROKERBENCH_HOME"]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.environ["HOME"], ".local", "share")
    return os.path.join(base, "brokerbench")


class Usage:
    """What one child process cost: its output (and, when kept apart, its error output), user
    and system CPU seconds, peak RSS in MB, its exit code, its CPU as it went (`trace`:
    (seconds since it started, CPU seconds so far), a few samples a second), and how often its
    threads were switched out (`switches`: voluntary and involuntary, all threads, from wait4)."""

    def __init__(self, text, user, system, rss_mb, code=0, errors="", trace=(), switches=0):
        self.text, self.user, self.system, self.rss_mb, self.code = text, user, system, rss_mb, code
        self.errors, self.trace, self.switches = errors, list(trace), switches

    @property
    def cpu(self):
        return self.user + self.system

    def steady_cpu_per_s(self, start=0.4, end=0.85):
        """CPU seconds per second between `start` and `end` of the process's life (fractions):
        its steady state, without its start-up (a JVM's class loading and compiling, seconds
        of CPU that a whole-process figure spreads over the run) or its shutdown. None when
        the trace is too short to tell (under a second between the two samples)."""
        if len(self.trace) < 4:
            return None
        life = self.trace[-1][0]
        first = min(self.trace, key=lambda s: abs(s[0] - start * life))
        last = min(self.trace, key=lambda s: abs(s[0] - end * life))
        if last[0] - first[0] < 1.0:
            return None
        return (last[1] - first[1]) / (last[0] - first[0])


def median(values):
    """The median of the values that are numbers (NaN marks a figure a run could not give);
    NaN when none is."""
    numbers = [v for v in values if not math.isnan(v)]
    return statistics.median(numbers) if numbers else math.nan


def process_cpu_s(pid):
    """User plus system CPU seconds of process `pid` and all its threads so far (/proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuTrace:
    """Samples a running child's CPU every `every` seconds on a thread, until `stop`."""

    def __init__(self, pid, every=0.25):
        self.samples, self._done = [], threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid, every), daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self, pid, every):
        while not self._done.wait(every):
            try:
                self.samples.append((time.monotonic() - self._started, process_cpu_s(pid)))
            except (OSError, IndexError, ValueError):
                return  # exited (or a zombie whose stat can no longer be read)

    def stop(self):
        self._done.set()
        self._thread.join()
        return self.samples


def host_busy(seconds=1.0):
    """The share of the host's CPU time (all cores) that was busy over the next `seconds`."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    total = total1 - total0
    return 1.0 - (idle1 - idle0) / total if total else 0.0


def settle(limit=0.15, timeout=30.0):
    """Waits until the host is quiet (at most `limit` of its CPU busy over a second; at most
    `timeout` seconds), so that a tool is not measured while the broker is still working off
    the previous tool's load (flushing, deleting its topic, collecting garbage): run right
    after another max-rate run, a tool paid for it — up to 40% more CPU per message."""
    deadline = time.monotonic() + timeout
    busy = host_busy()
    while busy > limit and time.monotonic() < deadline:
        busy = host_busy()
    if busy > limit:
        print(f"note: the host was still {busy:.0%} busy after {timeout:.0f} s of waiting", file=sys.stderr)


class RunFailed(Exception):
    """One tool's run that failed or ended with problems, and what they were. A bench records
    it, goes on with the next run, and leaves it out of the medians (see `medians`)."""


def timed(cmd, merge=True, allowed=(0,)):
    """Runs cmd to its end; returns a Usage of that child alone (the kernel's rusage via wait4).
    Raises RunFailed naming the command and the end of its output if it exits with a code not
    in `allowed`. merge=False leaves stderr out of the text."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=out if merge else err, text=True)
        trace = CpuTrace(child.pid)
        _, status, usage = os.wait4(child.pid, 0)
        samples = trace.stop()
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if code not in allowed:
        raise RunFailed(f"{os.path.basename(cmd[0])} exited {code}:\n{tail(errors + text)}")
    return Usage(text, usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024, code, errors, samples,
                 usage.ru_nvcsw + usage.ru_nivcsw)


def tail(text, lines=20, chars=2000):
    """The last lines of a tool's output, to say why it failed."""
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def summary_problems(summary):
    """What a brokerbench summary.json says went wrong (what makes it exit 1): not complete,
    errors, lost, duplicated, out-of-order or unacknowledged messages; [] for a clean run."""
    problems = []
    if summary.get("status") != "complete":
        problems.append(f"status {summary.get('status')}")
    if summary.get("errors"):
        problems.append("errors " + ", ".join(f"{k} {v}" for k, v in summary["errors"].items()))
    integrity = summary.get("integrity", {})
    for key in ("lost", "duplicated", "out_of_order", "unacknowledged"):
        if integrity.get(key):
            problems.append(f"{key} {integrity[key]}")
    return problems


def brokerbench_summary(usage):
    """The summary a `brokerbench run --json` printed; a run that exited 1 (it completed, with
    problems) raises RunFailed with the problems its summary names."""
    text = usage.text
    try:
        summary = json.loads(text[text.index("{"):])
    except ValueError:
        raise RunFailed(f"brokerbench exited {usage.code} and printed no summary:\n{tail(usage.errors + text)}")
    problems = summary_problems(summary)
    if usage.code != 0:
        raise RunFailed(f"brokerbench exited {usage.code}: " + ("; ".join(problems) or "see its notes"))
    return summary


def attempt(label, run, *args):
    """run(*args), or {"failed": why} when it failed: raised RunFailed, or gave output the
    bench could not read (printed as it happens, under `label`)."""
    try:
        return run(*args)
    except RunFailed as failed:
        why = str(failed)
    except (KeyError, IndexError, ValueError, ZeroDivisionError, subprocess.CalledProcessError) as e:
        why = f"its output was not understood ({type(e).__name__}: {e})"
    print(f"{label}: FAILED, left out of the medians: {why}", file=sys.stderr, flush=True)
    lines = [line.strip() for line in why.splitlines() if line.strip()] or ["failed"]
    return {"failed": lines[0] + (f" … {lines[-1]}" if len(lines) > 1 else "")}


def succeeded(results):
    """The results that did not fail."""
    return [r for r in results if "failed" not in r]


def left_out(label, results):
    """A line per failed run of `label`, saying it is not in the medians."""
    return [f"left out of the medians: {label}, run {i + 1}: {r['failed']}"
            for i, r in enumerate(results) if "failed" in r]


def timed_cpu(cmd):
    """Runs cmd; returns (output, CPU seconds, peak RSS MB) of that child process alone; exits
    saying why when it fails."""
    try:
        usage = timed(cmd)
    except RunFailed as failed:
        sys.exit(str(failed))
    return usage.text, usage.cpu, usage.rss_mb


def perftest_classpath(version="2.22.1"):
    """RabbitMQ PerfTest's jars, resolved from Maven Central with bench/perftest/pom.xml into
    <brokerbench home>/perftest/<version>/lib on first use."""
    lib = os.path.join(home(), "perftest", version, "lib")
    if not glob.glob(os.path.join(lib, f"perf-test-{version}.jar")):
        print(f"resolving PerfTest {version} into {lib} ...", file=sys.stderr, flush=True)
        pom = os.path.join(ROOT, "bench", "perftest", "pom.xml")
        mvn = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", pom, "dependency:copy-dependencies",
                              f"-DoutputDirectory={lib}", "-DincludeScope=runtime"], capture_output=True, text=True)
        if mvn.returncode != 0:
            sys.exit(f"mvn failed ({mvn.returncode}):\n{(mvn.stdout + mvn.stderr)[-3000:]}")
    return os.path.join(lib, "*")


def kafka_classpath():
    """The managed Kafka's jars (which include kafka-tools)."""
    lib = glob.glob(os.path.join(home(), "kafka", "*", "lib"))
    if not lib:
        sys.exit("Kafka is not installed: run scripts/setup (or brokerbench broker install kafka)")
    return os.path.join(lib[0], "*")
