//! The RabbitMQ driver against a real broker, driven through the engine. The broker's URI
//! comes from `BROKERBENCH_TEST_AMQP_URI` (e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`).
//! The tests are ignored by a plain `cargo test` (they need the broker); `scripts/test` starts
//! the managed RabbitMQ, sets the variable and runs them with `--ignored`. Run without it,
//! they fail and say so: none passes without checking.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brokerbench_amqp::config::{AmqpUri, RabbitMqDriverConfig};
use brokerbench_amqp::session::Session;
use brokerbench_amqp::{wire, AmqpDriver};
use brokerbench_driver::{Driver, DriverError};
use brokerbench_engine::{run, RunControl};
use brokerbench_model::{IntervalRow, RunObserver, RunStatus, Summary, Workload};

const URI_VARIABLE: &str = "BROKERBENCH_TEST_AMQP_URI";

fn broker_uri() -> AmqpUri {
    let text = std::env::var(URI_VARIABLE).unwrap_or_else(|_| {
        panic!("set {URI_VARIABLE} to the URI of a RabbitMQ broker (scripts/test does, for the managed one)")
    });
    AmqpUri::parse(&text).expect("a valid amqp:// URI")
}

struct Quiet;

impl RunObserver for Quiet {
    fn interval(&mut self, _row: &IntervalRow) {}
}

fn run_id() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs `workload` against the broker with the driver file `driver`.
fn run_with(uri: &AmqpUri, driver: &str, workload: &str) -> Summary {
    run_as(uri, driver, workload, &run_id())
}

/// `run_with` under the run id `run_id`, which names the run's exchanges and queues.
fn run_as(uri: &AmqpUri, driver: &str, workload: &str, run_id: &str) -> Summary {
    let config: RabbitMqDriverConfig = brokerbench_model::yaml::from_str(driver).unwrap();
    config.validate().unwrap();
    let workload: Workload = brokerbench_model::yaml::from_str(workload).unwrap();
    let mut driver = AmqpDriver::new(config, uri.clone());
    driver.connect().unwrap();
    assert!(
        driver
            .broker_version()
            .is_some_and(|v| v.contains("RabbitMQ")),
        "{:?}",
        driver.broker_version()
    );
    let control = RunControl {
        run_id: run_id.to_string(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let outcome = run(&workload, &mut driver, &mut Quiet, &control).unwrap();
    let summary = outcome.summary;
    eprintln!(
        "sent {} acknowledged {} failed {} received {} errors {:?} integrity {:?} publish p50 {} ns p99 {} ns notes {:?}",
        summary.total.sent,
        summary.total.acknowledged,
        summary.total.failed,
        summary.total.received,
        summary.errors,
        summary.integrity,
        summary.latency.publish.p50_ns,
        summary.latency.publish.p99_ns,
        summary.notes
    );
    summary
}

const SMALL: &str = "name: amqptest\nrate: 2000\nwarmup: 1s\nduration: 2s\ndrain_timeout: 5s\nproducers_per_topic: 1\nconsumers_per_topic: 1\n";

fn assert_lossless(s: &Summary, copies: u64) {
    assert!(s.integrity.checked, "{:?}", s.integrity);
    assert!(s.integrity.is_clean(), "{:?}", s.integrity);
    // Sends the generator held back behind its schedule on a busy host (18 of 6,000 once,
    // with a core kept busy and two more lanes of the suite) are not counted; nothing else
    // may have gone wrong.
    let held_back_only = s.errors.keys().all(|k| k == "not_sent_behind_schedule");
    assert!(held_back_only, "{:?}", s.errors);
    // The schedule's 3 s at 2000 msg/s, each message sent or held back (626 were held back
    // once, with a core kept busy and two more lanes of the suite).
    let held_back = s
        .errors
        .get("not_sent_behind_schedule")
        .copied()
        .unwrap_or(0);
    assert!(
        s.total.sent + held_back >= 5900,
        "3 s at 2000 msg/s: {} sent, {held_back} held back",
        s.total.sent
    );
    assert_eq!(s.total.received, s.total.sent * copies);
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn one_mebibyte_messages_cross_many_frames_and_lose_nothing() {
    let uri = broker_uri();
    // 1 MiB bodies: eight 128 KiB body frames each way, put together again by the consumer.
    let workload = SMALL
        .replace("rate: 2000", "rate: 40")
        .replace("duration: 2s", "duration: 3s")
        + "message_size: 1048576\n";
    let s = run_with(&uri, "{}", &workload);
    assert!(
        s.integrity.checked && s.integrity.is_clean(),
        "{:?}",
        s.integrity
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.total.received, s.total.sent);
    assert!(s.total.received >= 100, "{:?}", s.total);
    assert_eq!(
        s.total.bytes_received,
        s.total.received * 1_048_576,
        "{:?}",
        s.total
    );
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn one_second_heartbeats_keep_an_idle_consumer_connected_for_ten_seconds() {
    let uri = broker_uri();
    // heartbeat=1: the broker closes a connection it hears nothing from for about 2 s. A
    // message every 4 s, consumed with automatic acknowledgement, leaves both connections
    // silent for seconds at a time: only heartbeats keep them.
    let mut with_heartbeats = uri.clone();
    with_heartbeats.heartbeat = Some(1);
    let workload = SMALL
        .replace("rate: 2000", "rate: 0.25")
        .replace("duration: 2s", "duration: 10s");
    let s = run_with(&with_heartbeats, "{ack: {mode: auto}}", &workload);
    assert!(
        s.integrity.checked && s.integrity.is_clean(),
        "{:?}",
        s.integrity
    );
    assert!(s.outages.is_empty(), "{:?}", s.outages);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.total.received, s.total.sent);
    assert!(s.total.received >= 2, "{:?}", s.total);
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn topic_and_headers_exchanges_route_to_every_bound_queue() {
    let uri = broker_uri();
    for kind in ["topic", "headers"] {
        let s = run_with(
            &uri,
            &format!("exchange: {{type: {kind}}}\nqueues_per_topic: 2"),
            SMALL,
        );
        assert_lossless(&s, 2);
    }
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn auto_and_batched_manual_acknowledgements_lose_nothing() {
    let uri = broker_uri();
    let s = run_with(&uri, "ack: {mode: auto}", SMALL);
    assert_lossless(&s, 1);
    let s = run_with(
        &uri,
        "ack: {mode: manual, multiple_every: 50}\nprefetch: 100",
        &SMALL.replace("consumers_per_topic: 1", "consumers_per_topic: 2"),
    );
    assert_lossless(&s, 1);
    assert_eq!(s.consumers.len(), 2, "two competing consumers on one queue");
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn shared_connections_and_transient_messages_lose_nothing() {
    let uri = broker_uri();
    let s = run_with(
        &uri,
        "channels_per_connection: 3\npersistent: false\nqueue: {durable: false}",
        &SMALL
            .replace("producers_per_topic: 1", "producers_per_topic: 3")
            .replace("consumers_per_topic: 1", "consumers_per_topic: 3"),
    );
    assert_lossless(&s, 1);
}

#[test]
fn an_absent_broker_is_unreachable_within_seconds() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let uri = AmqpUri::parse(&format!("amqp://guest:guest@127.0.0.1:{port}/%2f")).unwrap();
    let mut driver = AmqpDriver::new(RabbitMqDriverConfig::default(), uri);
    let started = Instant::now();
    let error = driver.connect().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    match &error {
        DriverError::Unreachable {
            broker,
            address,
            hint,
            ..
        } => {
            assert_eq!(*broker, "rabbitmq");
            assert_eq!(address, &format!("127.0.0.1:{port}"));
            assert!(hint.contains("brokerbench broker up rabbitmq"));
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_wrong_password_is_an_authentication_error_without_the_password() {
    let uri = broker_uri();
    let wrong = format!(
        "amqp://{}:not-the-Secret-42@{}/{}",
        uri.username,
        uri.address(),
        if uri.vhost == "/" { "%2f" } else { &uri.vhost }
    );
    let mut driver = AmqpDriver::new(
        RabbitMqDriverConfig::default(),
        AmqpUri::parse(&wrong).unwrap(),
    );
    let started = Instant::now();
    let error = driver.connect().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(
            error,
            DriverError::Authentication {
                broker: "rabbitmq",
                ..
            }
        ),
        "{error:?}"
    );
    let text = format!("{error} {error:?} {driver:?}");
    assert!(text.contains("ACCESS_REFUSED"), "{text}");
    assert!(!text.contains("not-the-Secret-42"), "{text}");
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_queue_declared_again_with_other_arguments_is_refused_with_the_brokers_reason() {
    let uri = broker_uri();
    let topology = brokerbench_driver::Topology {
        run_id: run_id(),
        workload: "redeclare".into(),
        topics: 1,
        partitions_per_topic: 1,
        consumers_per_topic: 1,
        subscriptions_per_topic: 1,
        shard: None,
    };
    let driver = |text: &str| {
        let config: RabbitMqDriverConfig = brokerbench_model::yaml::from_str(text).unwrap();
        let mut driver = AmqpDriver::new(config, uri.clone());
        driver.connect().unwrap();
        driver
    };
    // The same names (same run id), a classic queue first, then a quorum one: RabbitMQ
    // refuses the second declaration with 406 PRECONDITION_FAILED.
    let mut first = driver("{queue: {type: classic}, delete_queues: true}");
    first.prepare(&topology).unwrap();
    let mut second = driver("{queue: {type: quorum}, delete_queues: false}");
    let error = second.prepare(&topology).unwrap_err().to_string();
    first.cleanup().unwrap();
    assert!(
        error.contains("406")
            && error.contains("PRECONDITION_FAILED")
            && error.contains("x-queue-type"),
        "{error}"
    );
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_missing_virtual_host_is_named() {
    let uri = broker_uri();
    let other = format!(
        "amqp://{}:{}@{}/no-such-vhost-bb",
        uri.username,
        uri.password(),
        uri.address()
    );
    let mut driver = AmqpDriver::new(
        RabbitMqDriverConfig::default(),
        AmqpUri::parse(&other).unwrap(),
    );
    let text = driver.connect().unwrap_err().to_string();
    assert!(text.contains("no-such-vhost-bb"), "{text}");
}

/// How long a disturbed run goes on after the disturbance: 2000 msg/s × 2 s of sends that
/// must fail.
const AFTER_DISTURBANCE: Duration = Duration::from_secs(2);

/// A disturbed run's workload: SMALL, but long enough for any disturbance; it is stopped
/// AFTER_DISTURBANCE after the disturbance returns.
fn disturbed_workload() -> String {
    SMALL.replace("duration: 2s", "duration: 60s")
}

/// Runs `workload` while `disturb` acts on the broker after `after`, and stops the run
/// AFTER_DISTURBANCE after `disturb` returns, not at a fixed time: under load a command such
/// as rabbitmqctl can take longer than a short run lasts.
fn run_disturbed(
    uri: &AmqpUri,
    driver: &str,
    workload: &str,
    after: Duration,
    disturb: impl FnOnce(&RabbitMqDriverConfig, &str, &str) + Send + 'static,
) -> Summary {
    run_disturbed_rows(uri, driver, workload, after, disturb).0
}

/// Each second's producers blocked by the broker, as the run's rows say.
#[derive(Default)]
struct BlockedRows(Vec<u64>);

impl RunObserver for BlockedRows {
    fn interval(&mut self, row: &IntervalRow) {
        self.0.push(row.blocked_producers);
    }
}

/// [`run_disturbed`], with each second's count of blocked producers.
fn run_disturbed_rows(
    uri: &AmqpUri,
    driver: &str,
    workload: &str,
    after: Duration,
    disturb: impl FnOnce(&RabbitMqDriverConfig, &str, &str) + Send + 'static,
) -> (Summary, Vec<u64>) {
    let config: RabbitMqDriverConfig = brokerbench_model::yaml::from_str(driver).unwrap();
    let workload: Workload = brokerbench_model::yaml::from_str(workload).unwrap();
    let mut driver = AmqpDriver::new(config.clone(), uri.clone());
    driver.connect().unwrap();
    let control = RunControl {
        run_id: run_id(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let (name, id, stop) = (
        workload.name.clone(),
        control.run_id.clone(),
        control.stop.clone(),
    );
    let disturber = std::thread::spawn(move || {
        std::thread::sleep(after);
        disturb(&config, &name, &id);
        std::thread::sleep(AFTER_DISTURBANCE);
        stop.store(true, Ordering::SeqCst);
    });
    let mut rows = BlockedRows::default();
    let summary = run(&workload, &mut driver, &mut rows, &control)
        .unwrap()
        .summary;
    disturber.join().unwrap();
    eprintln!(
        "sent {} acknowledged {} failed {} received {} errors {:?} integrity {:?}",
        summary.total.sent,
        summary.total.acknowledged,
        summary.total.failed,
        summary.total.received,
        summary.errors,
        summary.integrity
    );
    (summary, rows.0)
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_deleted_exchange_fails_sends_by_kind_without_a_panic() {
    let uri = broker_uri();
    let admin_uri = uri.clone();
    let s = run_disturbed(
        &uri,
        "{}",
        &disturbed_workload(),
        Duration::from_millis(2500),
        move |config, workload, run_id| {
            let names = brokerbench_amqp::TopicNames::new(config, workload, run_id, 0);
            let session = Arc::new(Session::open(&admin_uri, "test-admin").unwrap());
            let mut channel = session.channel().unwrap();
            let mut frame = Vec::new();
            wire::method(
                &mut frame,
                channel.number(),
                wire::id::EXCHANGE_DELETE,
                |out| {
                    out.extend_from_slice(&[0, 0]);
                    wire::put_short_string(out, &names.exchange);
                    out.push(0);
                },
            );
            channel
                .call(frame, wire::id::EXCHANGE_DELETE_OK, Duration::from_secs(10))
                .unwrap();
        },
    );
    let failed = s.errors.get("channel_closed").copied().unwrap_or(0);
    assert!(
        failed > 1000,
        "sends after the deletion fail: {:?}",
        s.errors
    );
    assert!(s.total.acknowledged > 3000, "{:?}", s.total);
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("the broker closed a producer's channel: 404 NOT_FOUND")),
        "the broker's reason, in its words: {:?}",
        s.notes
    );
    assert_eq!(s.integrity.lost, 0, "{:?}", s.integrity);
}

/// A shell command that closes the test broker's client connections whose name contains its
/// first argument (the run id; other tests run meanwhile), e.g.
/// `rabbitmqctl -q list_connections pid client_properties | grep -F "$1" | cut -f1 | while read -r p; do
/// rabbitmqctl close_connection "$p" test; done` (scripts/test sets it for the managed node).
const CLOSE_VARIABLE: &str = "BROKERBENCH_TEST_AMQP_CLOSE_CMD";

fn close_command() -> String {
    std::env::var(CLOSE_VARIABLE).unwrap_or_else(|_| {
        panic!("set {CLOSE_VARIABLE} to a command that closes the broker's client connections (scripts/test does)")
    })
}

/// A run whose connections the broker closes 1.5 s in (rabbitmqctl takes ~0.5 s a call on a
/// quiet machine, several seconds on a busy one), with the driver file `driver`.
fn run_with_connections_closed(uri: &AmqpUri, driver: &str) -> Summary {
    let command = close_command();
    run_disturbed(
        uri,
        driver,
        &disturbed_workload(),
        Duration::from_millis(1500),
        move |_, _, run_id| {
            let status = std::process::Command::new("sh")
                .args(["-c", &command, "sh", run_id])
                .status()
                .unwrap();
            assert!(status.success(), "{command}: {status}");
        },
    )
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn without_reconnect_a_lost_connection_fails_sends_by_kind_without_a_panic() {
    let s = run_with_connections_closed(&broker_uri(), "reconnect: false");
    let failed = s.errors.get("connection_closed").copied().unwrap_or(0);
    assert!(failed > 1000, "sends after the close fail: {:?}", s.errors);
    assert!(s.total.acknowledged > 2000, "{:?}", s.total);
    assert!(
        s.outages.is_empty(),
        "no reconnect, no outage that ends: {:?}",
        s.outages
    );
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_closed_connection_is_reconnected_and_reported_as_an_outage() {
    let s = run_with_connections_closed(&broker_uri(), "{}");
    assert_eq!(s.outages.len(), 1, "{:?} {:?}", s.outages, s.notes);
    let o = &s.outages[0];
    let back = o.duration_s().expect("acknowledged again after the close");
    assert!(back < 5.0, "reconnected within the backoff: {o:?}");
    assert_eq!(
        s.total.sent,
        s.total.acknowledged + s.total.failed + s.integrity.unacknowledged,
        "every message sent was acknowledged, failed at the close, or still in flight: {:?}",
        s.total
    );
    // The producer's messages in flight at the close, and the consumer's one error. At most
    // `confirms.max_outstanding` wait for their confirms: on a busy host all of them may
    // (1,000 of 1,000 once, with a core kept busy and two more lanes of the suite).
    let closed = s.errors.get("connection_closed").copied().unwrap_or(0);
    let in_flight_at_most = RabbitMqDriverConfig::default().confirms.max_outstanding as u64;
    assert!(
        closed <= s.total.failed + 1 && s.total.failed <= in_flight_at_most,
        "only what was in flight at the close failed: {:?} {:?}",
        s.errors,
        s.total
    );
    assert_eq!(s.integrity.lost, 0, "{:?}", s.integrity);
    assert!(
        s.notes.iter().any(|n| n.contains("BROKER UNAVAILABLE")),
        "{:?}",
        s.notes
    );
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn publish_latency_is_not_inflated_by_the_gap_between_sends() {
    let uri = broker_uri();
    let s = run_with(
        &uri,
        "persistent: false\nqueue: {durable: false}",
        "name: amqplatency\nrate: 500\nwarmup: 1s\nduration: 3s\ndrain_timeout: 5s\nproducers_per_topic: 1\nconsumers_per_topic: 1\n",
    );
    let (publish, e2e) = (&s.latency.publish, &s.latency.end_to_end);
    eprintln!(
        "publish p50 {} p99 {} ns; end-to-end p50 {} p99 {} ns",
        publish.p50_ns, publish.p99_ns, e2e.p50_ns, e2e.p99_ns
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert!(s.total.acknowledged >= 1400, "{}", s.total.acknowledged);
    assert!(
        publish.p50_ns < e2e.p50_ns + 1_000_000,
        "publish p50 {} ns, end-to-end p50 {} ns",
        publish.p50_ns,
        e2e.p50_ns
    );
}

/// rabbitmqctl for the test broker's node, as a shell command prefix (scripts/test sets it
/// for the managed node).
const CTL_VARIABLE: &str = "BROKERBENCH_TEST_AMQP_CTL";

fn ctl() -> String {
    std::env::var(CTL_VARIABLE).unwrap_or_else(|_| {
        panic!("set {CTL_VARIABLE} to rabbitmqctl for the test broker's node (scripts/test does)")
    })
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_memory_alarm_is_reported_as_publishing_blocked_with_the_reason() {
    let uri = broker_uri();
    let ctl = ctl();
    let sh = move |args: &str| {
        let status = std::process::Command::new("sh")
            .args(["-c", &format!("{ctl} {args}")])
            .status()
            .unwrap();
        assert!(status.success(), "{ctl} {args}: {status}");
    };
    // The node blocks publishers while its memory is above a watermark set tiny, for 3 s,
    // and lifts the block when the watermark is back at RabbitMQ's default.
    let (s, blocked) = run_disturbed_rows(
        &uri,
        "{}",
        &disturbed_workload(),
        Duration::from_millis(1500),
        move |_, _, _| {
            /// Sets the watermark back even if the test fails.
            struct Restore<F: Fn(&str)>(F);
            impl<F: Fn(&str)> Drop for Restore<F> {
                fn drop(&mut self) {
                    (self.0)("set_vm_memory_high_watermark 0.4");
                }
            }
            let restore = Restore(sh);
            (restore.0)("set_vm_memory_high_watermark 0.0000001");
            std::thread::sleep(Duration::from_secs(3));
            drop(restore);
        },
    );
    assert_eq!(s.blocks.len(), 1, "{:?} {:?}", s.blocks, s.notes);
    // timeseries.csv's blocked_producers: the one producer, in an unbroken run of the seconds
    // the block touched (it lasted over 1 s: over 2 seconds; how many more depends on how
    // long rabbitmqctl took to lift it).
    let flagged: Vec<usize> = (0..blocked.len()).filter(|&i| blocked[i] > 0).collect();
    assert!(flagged.len() >= 2, "blocked per second: {blocked:?}");
    assert_eq!(
        flagged.last().unwrap() - flagged[0] + 1,
        flagged.len(),
        "one unbroken run: {blocked:?}"
    );
    assert!(blocked.iter().all(|&n| n <= 1), "{blocked:?}");
    let block = &s.blocks[0];
    assert!(block.reason.contains("memory"), "{block:?}");
    let end = block.end_s.expect("the block was lifted");
    assert!(end - block.start_s > 1.0, "{block:?}");
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("PUBLISHING BLOCKED") && n.contains("memory")),
        "{:?}",
        s.notes
    );
    assert!(s.outages.is_empty() && s.stalls.is_empty(), "{:?}", s.notes);
    assert!(!s.client_bound, "{:?}", s.notes);
    assert_eq!(s.integrity.lost, 0, "{:?}", s.integrity);
}

#[test]
#[ignore = "needs RabbitMQ: scripts/test runs it with --ignored against the managed node"]
fn a_message_above_the_brokers_limit_stops_the_run_with_the_brokers_reason() {
    let uri = broker_uri();
    let ctl = ctl();
    let set_limit = move |bytes: u64| {
        let command =
            format!("{ctl} eval 'application:set_env(rabbit, max_message_size, {bytes}).'");
        let status = std::process::Command::new("sh")
            .args(["-c", &command])
            .status()
            .unwrap();
        assert!(status.success(), "{command}: {status}");
    };
    /// RabbitMQ's default limit back, even if the test fails.
    struct Restore<F: Fn(u64)>(F);
    impl<F: Fn(u64)> Drop for Restore<F> {
        fn drop(&mut self) {
            (self.0)(128 << 20);
        }
    }
    let restore = Restore(set_limit);
    (restore.0)(10_000);
    let s = run_with(
        &uri,
        "{}",
        &SMALL
            .replace("rate: 2000", "rate: 200\nmessage_size: 20000")
            .replace("duration: 2s", "duration: 30s"),
    );
    drop(restore);
    assert_eq!(s.status, RunStatus::Failed, "stopped early: {:?}", s.notes);
    assert!(s.notes[0].starts_with("STOPPED after 2 s"), "{:?}", s.notes);
    assert!(
        s.notes.iter().any(|n| n.contains("406 PRECONDITION_FAILED")
            && n.contains("larger than configured max size 10000")),
        "the broker's reason: {:?}",
        s.notes
    );
}
