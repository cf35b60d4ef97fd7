#!/usr/bin/env python3
"""The test suite in groups, each timed; scripts/test calls it.

Every test binary is built first (release: the suite measures the real binary). The
integration tests of the repository are one binary, `suite` (tests/suite/), whose top-level
modules are the groups below; the unit tests of every crate and the crates' own tests that
need no broker form the group `unit`, except those that check how well the engine keeps time
(the group `timing`, which runs alone before the others). A family's group runs everything that needs its managed
broker (the conformance suite's checks for it, its own tests, its crate's broker tests), which
the first test starts; the broker is taken down when the group ends, so idle JVMs do not slow
what follows.

Each test of `suite` runs in a process of its own (as cargo-nextest runs tests), one at a time
within its group, with a deadline of its own. The groups run in three lanes side by side: each
lane takes its groups in order, and no two groups share a broker, a port or a home. Most of a
broker test's time is waiting (for a broker to start, for a run's seconds to pass), so lanes
keep both cores in use; the tests widen what they check by how late the host wakes threads, so
a busy host slows them, it does not fail them.

At the end the groups' wall times are printed, slowest first, with the total and the slowest
tests; a failed test's output follows the table. Everything is kept in target/test-logs/:
GROUP.log (each test's output), times.tsv (each test's wall time).

Usage: scripts/suite.py [--quick] [--list] [--setup] [--lanes N] [GROUP ...]
  --quick    the working loop's tier: the crates' unit tests, the CLI tests that need no
             broker, the runs and signals on the mock family, and one real Kafka run
  --list     the groups and their tests, nothing run
  --setup    run `scripts/setup --tools` (every family's broker, the test tools: mostly
             downloads) beside the build (all compiling), and wait for it before the first
             group; scripts/test passes it
  --lanes N  groups side by side (default 3; 1 runs everything one after the other)
  GROUP      only these groups
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
LOGS = TARGET / "test-logs"
SETUP_LOG = LOGS / "setup.log"
BINARY = TARGET / "release" / "brokerbench"
# A test that has not ended after this long is killed and failed: its own waits are far
# shorter (the longest, a broker's recovery, allows 5 minutes). This only keeps a hung test
# from holding CI to its limit.
TEST_TIMEOUT_S = 12 * 60
# The unit tests of the crates that start a real broker of their own (in a home of their
# own): they run in that family's group, not in `unit`; so does the AMQP client's `broker`
# binary, whose tests take the managed RabbitMQ.
REAL_BROKER_UNIT_TESTS = "managed::tests::real_"


@dataclass
class Group:
    name: str
    about: str
    # The lane it runs in; None: alone, before the lanes start (its tests measure how well the
    # engine keeps time, which a broker starting in another lane would disturb).
    lane: object
    # Families whose managed broker is taken down when the group ends.
    brokers: list = field(default_factory=list)
    # Crate test binaries run in this group: (binary, arguments).
    binaries: list = field(default_factory=list)


PLAN = [
    Group("kafka", "the conformance suite on Kafka, and Kafka's own tests", 0, ["kafka"],
          [("brokerbench-kafka (lib unit)", [REAL_BROKER_UNIT_TESTS])]),
    Group("offline", "the CLI, docs and files, with no broker", 1),
    Group("mock", "runs, studies, reports, shards and signals on the in-memory mock family", 1),
    Group("timing", "the engine's pipeline on the mock, /proc sampling and the search: timed", None),
    Group("unit", "unit tests of every crate, and the crates' own tests that need no broker", 2),
    Group("rabbitmq", "the conformance suite on RabbitMQ, its own tests, the AMQP client's",
          1, ["rabbitmq"],
          [("brokerbench-amqp (lib unit)", [REAL_BROKER_UNIT_TESTS]),
           ("broker", ["--ignored", "--test-threads=1"])]),
    Group("artemis", "the conformance suite on ActiveMQ Artemis, and its own tests", 2,
          ["artemis"]),
    Group("redis", "the conformance suite on Redis Streams, and its own tests", 0, ["redis"]),
    Group("nats", "the conformance suite on NATS JetStream, and its own tests", 2, ["nats"]),
    Group("mqtt", "the conformance suite on MQTT (mosquitto), and its own tests", 0, ["mqtt"]),
    Group("pulsar", "the conformance suite on Apache Pulsar, and its own tests", 1, ["pulsar"]),
    Group("clusters", "three-node clusters and their faults, each in a home of its own", 2),
    Group("studies", "the bundled studies: every one planned, the cells run nowhere else", 0),
]

# The crates' test binaries that check how well the engine keeps time: the group `timing`.
TIMING_BINARIES = {"pipeline", "proc_sampling", "search_mock"}

# Tests that take their group's broker down (and leave it so): the last of their group, so
# that no test after them has to start it again.
LAST = re.compile(r"broker_stopped_mid_run")

# The quick tier: these groups' tests, and the crates' unit tests.
QUICK_TESTS = re.compile(
    r"^(offline::(cli|families|refusals)::|mock::(runs|signals)::|"
    r"kafka::conformance::a_lossless_run_is_counted_by_the_broker$)"
)


def build():
    """Builds every test binary; {name: (path, kind)}: `suite`, each crate test binary by its
    target name, and each crate's unit tests as `PACKAGE (lib unit)`."""
    command = [
        # The library, binary and test targets: not the examples (the benchmarks' floors,
        # which clippy checks), 16 s of the build's compiling.
        "cargo", "test", "--release", "--workspace", "--locked", "--no-run",
        "--lib", "--bins", "--tests",
        "--message-format=json-render-diagnostics",
    ]
    started = time.monotonic()
    output = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    if output.returncode != 0:
        sys.exit(f"error: building the tests failed ({' '.join(command)})")
    binaries = {}
    for line in output.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        target = message["target"]
        kind = target["kind"][0]
        package = message["package_id"].split("#")[-1].split("@")[0].split("/")[-1]
        name = target["name"] if kind == "test" else f"{package} ({kind} unit)"
        binaries[name] = (message["executable"], kind)
    print(f"built {len(binaries)} test binaries in {time.monotonic() - started:.0f} s", flush=True)
    return binaries


def suite_tests(suite):
    """Every test of the suite binary, by group (its top-level module)."""
    listed = subprocess.run(
        [suite, "--list", "--format=terse"], stdout=subprocess.PIPE, text=True, check=True
    )
    groups = {}
    for line in listed.stdout.splitlines():
        if line.endswith(": test"):
            name = line[: -len(": test")]
            groups.setdefault(name.split("::")[0], []).append(name)
    stray = sorted(set(groups) - {g.name for g in PLAN})
    if stray:
        sys.exit(f"error: tests/suite has modules the plan in {__file__} does not place: {stray}")
    return groups


@dataclass
class Job:
    """One process: a test of `suite`, or a crate's test binary; `env` gives what it adds
    to the environment, when it starts."""
    label: str
    argv: list
    env: object = dict


def jobs(group, binaries, tests, quick):
    """What running `group` means, in order."""
    runs = []
    if group.name in ("unit", "timing"):
        for name, (path, kind) in sorted(binaries.items()):
            if name in ("suite", "broker") or (quick and kind != "lib"):
                continue
            if (name in TIMING_BINARIES) != (group.name == "timing"):
                continue
            runs.append(Job(name, [path, "--skip", REAL_BROKER_UNIT_TESTS]))
        return runs
    ordered = sorted(tests.get(group.name, []), key=lambda name: bool(LAST.search(name)))
    for name in ordered:
        if quick and not QUICK_TESTS.search(name):
            continue
        runs.append(Job(name, [binaries["suite"][0], "--exact", name, "--test-threads=1"]))
    if not quick:
        for name, arguments in group.binaries:
            runs.append(Job(name, [binaries[name][0], *arguments], lambda: broker_env(group)))
    return runs


def brokerbench_home():
    """The brokerbench home, as brokerbench finds it."""
    if os.environ.get("BROKERBENCH_HOME"):
        return Path(os.environ["BROKERBENCH_HOME"])
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local/share"
    return Path(data) / "brokerbench"


def tools_env():
    """Where the tests find the tools scripts/setup --all installed outside PATH."""
    validate = brokerbench_home() / "tools/venv/bin/kubernetes-validate"
    return {"BROKERBENCH_TEST_KUBERNETES_VALIDATE": str(validate)}


def broker_env(group):
    """The environment a crate's broker tests take their broker from (RabbitMQ's)."""
    if group.name != "rabbitmq":
        return {}
    # As the group's tests start it (TLS on, the plain listener unchanged).
    up = subprocess.run([BINARY, "broker", "up", "rabbitmq", "--tls"], stdout=subprocess.PIPE,
                        text=True)
    address = re.search(r"127\.0\.0\.1:\d+", up.stdout or "")
    if up.returncode != 0 or not address:
        return {}
    address = address.group(0)
    port = address.rsplit(":", 1)[1]
    node = brokerbench_home() / "rabbitmq"
    # rabbitmqctl in the node's own environment (its folder holds the cookie; see
    # crates/amqp/src/managed/mod.rs).
    ctl = " ".join([
        "env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        f"HOME='{node}'",
        f"RABBITMQ_CONF_ENV_FILE='{node / 'rabbitmq-env.conf'}'",
        "ERL_EPMD_ADDRESS=127.0.0.1",
        "RABBITMQ_CTL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'",
        f"/usr/lib/rabbitmq/bin/rabbitmqctl -q -n brokerbench_{port}@localhost",
    ])
    # The connection-loss test closes the connections of its own run (named with the run id,
    # its first argument).
    close = (
        f'{ctl} list_connections pid client_properties | grep -F -- "$1" | cut -f1 | '
        f'while read -r pid; do {ctl} close_connection "$pid" brokerbench-test </dev/null; done'
    )
    return {
        "BROKERBENCH_TEST_AMQP_URI": f"amqp://guest:guest@{address}/%2f",
        "BROKERBENCH_TEST_AMQP_CTL": ctl,
        "BROKERBENCH_TEST_AMQP_CLOSE_CMD": close,
    }


@dataclass
class Outcome:
    name: str
    seconds: float = 0.0
    passed: int = 0
    failed: int = 0
    ignored: int = 0
    times: list = field(default_factory=list)
    problems: list = field(default_factory=list)


def run_group(group, binaries, tests, quick):
    LOGS.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(group.name)
    started = time.monotonic()
    with open(LOGS / f"{group.name}.log", "w") as log:
        for job in jobs(group, binaries, tests, quick):
            log.write(f"\n==> {job.label}\n")
            log.flush()
            began = time.monotonic()
            text, code = run_logged(job, log)
            outcome.times.append((time.monotonic() - began, job.label))
            count(outcome, job.label, text, code)
        for family in group.brokers:
            down = subprocess.run([BINARY, "broker", "down", family], stdout=log, stderr=log)
            if down.returncode != 0:
                outcome.problems.append(f"`brokerbench broker down {family}` failed: see the log")
    outcome.seconds = time.monotonic() - started
    return outcome


def run_logged(job, log):
    """Runs one process in a process group of its own; its output and exit code."""
    env = dict(os.environ, **tools_env(), **job.env())
    process = subprocess.Popen(
        job.argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    try:
        text, _ = process.communicate(timeout=TEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        text, _ = process.communicate()
        text += f"\n[scripts/suite.py: killed after {TEST_TIMEOUT_S} s]\n"
        log.write(text)
        return text, -1
    log.write(text)
    return text, process.returncode


def count(outcome, label, text, code):
    """Adds what one process printed to its group's outcome."""
    results = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text)
    for passed, failed, ignored in results:
        outcome.passed += int(passed)
        outcome.failed += int(failed)
        outcome.ignored += int(ignored)
    if code != 0:
        if not results:
            outcome.failed += 1
        failures = text[text.find("\nfailures:") :] if "\nfailures:" in text else text[-6000:]
        outcome.problems.append(f"{label} exited {code}:\n{failures.strip()}")


def run_lanes(plan, lanes, binaries, tests, quick):
    """Each lane's groups in order, the lanes side by side; the outcomes in plan order."""
    outcomes = {}
    lock = threading.Lock()

    def lane(groups):
        for group in groups:
            outcome = run_group(group, binaries, tests, quick)
            with lock:
                outcomes[group.name] = outcome
                state = "ok  " if not outcome.problems else "FAIL"
                failed = f", {outcome.failed} failed" if outcome.failed else ""
                print(f"{state} {group.name:<9} {outcome.seconds:7.1f} s  {outcome.passed} passed"
                      f"{failed}", flush=True)

    for group in [g for g in plan if g.lane is None]:
        lane([group])
    by_lane = {}
    for group in [g for g in plan if g.lane is not None]:
        by_lane.setdefault(group.lane % lanes, []).append(group)
    threads = [threading.Thread(target=lane, args=(groups,)) for groups in by_lane.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [outcomes[g.name] for g in plan]


def parse(argv):
    """(quick, listing, setup, lanes, asked groups) from the command line, or exit naming what is
    wrong and the fix."""
    if "--help" in argv or "-h" in argv:
        print(__doc__[__doc__.index("Usage:"):].rstrip())
        sys.exit(0)
    lanes = 3
    if "--lanes" in argv:
        at = argv.index("--lanes")
        value = argv[at + 1] if at + 1 < len(argv) else ""
        if not value.isdigit() or int(value) < 1:
            sys.exit(f"error: --lanes needs a number of lanes, 1 or more (got {value!r}),"
                     " e.g. --lanes 2")
        lanes = int(value)
        argv = argv[:at] + argv[at + 2:]
    flags = [a for a in argv if a.startswith("-")]
    wrong = [f for f in flags if f not in ("--quick", "--list", "--setup")]
    if wrong:
        sys.exit(f"error: no option {' '.join(wrong)}; the options: --quick --list --setup"
                 " --lanes N"
                 " (--help says what each does)")
    asked = [a for a in argv if not a.startswith("-")]
    unknown = sorted(set(asked) - {g.name for g in PLAN})
    if unknown:
        sys.exit(f"error: no group {' '.join(unknown)}; the groups: "
                 f"{' '.join(g.name for g in PLAN)}")
    return "--quick" in flags, "--list" in flags, "--setup" in flags, lanes, asked


def start_setup():
    """Starts `scripts/setup --tools` in the background, its output to LOGS/setup.log:
    (the process, the thread that waits for it, {"s": its wall time, once it has ended})."""
    LOGS.mkdir(parents=True, exist_ok=True)
    print(f"installing every family's broker and the test tools beside the build"
          f" (scripts/setup --tools, log: {SETUP_LOG})", flush=True)
    with open(SETUP_LOG, "w") as log:
        process = subprocess.Popen([REPO / "scripts" / "setup", "--tools"], cwd=REPO,
                                   stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT)
    started = time.monotonic()
    took = {}

    def wait():
        process.wait()
        took["s"] = time.monotonic() - started

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    return process, waiter, took


def finish_setup(process, waiter, took):
    """Waits for the setup `start_setup` started (never cut short: apt-get may be installing);
    exits with its last lines when it failed."""
    waiter.join()
    code = process.returncode
    if code != 0:
        last = "\n".join(SETUP_LOG.read_text(errors="replace").splitlines()[-30:])
        sys.exit(f"{last}\nerror: scripts/setup --tools failed (exit {code}); the lines above"
                 f" are its last, the whole of it is in {SETUP_LOG}")
    print(f"every family's broker and the test tools installed in {took['s']:.0f} s"
          f" (beside the build)", flush=True)


def main(argv):
    quick, listing, setup, lanes, asked = parse(argv)
    installing = start_setup() if setup else None
    try:
        binaries = build()
    finally:
        if installing:
            finish_setup(*installing)
    tests = suite_tests(binaries["suite"][0])
    plan = [g for g in PLAN if not asked or g.name in asked]
    plan = [g for g in plan if jobs(g, binaries, tests, quick)]
    if listing:
        for group in plan:
            where = "alone, first" if group.lane is None else f"lane {group.lane % lanes}"
            print(f"{group.name} ({where}): {group.about}")
            for job in jobs(group, binaries, tests, quick):
                print(f"  {job.label}")
        return 0
    started = time.monotonic()
    outcomes = run_lanes(plan, lanes, binaries, tests, quick)
    left = take_down_what_runs()
    report(outcomes, time.monotonic() - started)
    if left:
        print(f"\nnote: still running after its group, now taken down: {', '.join(left)}")
    return 1 if any(o.problems for o in outcomes) else 0


def take_down_what_runs():
    """Takes down every managed broker of the home still running (none should be: each group
    takes its own down); their names."""
    left = []
    for group in PLAN:
        for family in group.brokers:
            status = subprocess.run([BINARY, "broker", "status", family],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if status.returncode == 0:
                left.append(family)
                subprocess.run([BINARY, "broker", "down", family],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return left


def report(outcomes, total_s):
    with open(LOGS / "times.tsv", "w") as times:
        for outcome in outcomes:
            for seconds, label in outcome.times:
                times.write(f"{seconds:.1f}\t{outcome.name}\t{label}\n")
    print("\nwall time by group, slowest first:")
    for outcome in sorted(outcomes, key=lambda o: -o.seconds):
        print(f"  {outcome.name:<9} {outcome.seconds:7.1f} s  {outcome.passed:4} passed"
              f"  {outcome.failed:2} failed  {outcome.ignored:2} ignored")
    passed = sum(o.passed for o in outcomes)
    failed = sum(o.failed for o in outcomes)
    print(f"  {'total':<9} {total_s:7.1f} s  {passed:4} passed  {failed:2} failed"
          f"  (wall time; the groups ran in lanes side by side)")
    slowest = sorted((t for o in outcomes for t in o.times), reverse=True)[:10]
    print("\nslowest tests:")
    for seconds, label in slowest:
        print(f"  {seconds:7.1f} s  {label}")
    print(f"\nlogs: {LOGS}/GROUP.log, each test's time: {LOGS}/times.tsv")
    for outcome in outcomes:
        for problem in outcome.problems:
            print(f"\n==== {outcome.name}: {problem}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
