//! NATS JetStream against the real managed server (the release brokerbench pins, from
//! PyPI): the conformance suite, and what is NATS's own.

mod study_restart;
mod study_secrets;

use std::time::{Duration, Instant};

use brokerbench_driver::{
    Consumer, ConsumerSlot, Driver, Envelope, OutgoingMessage, ProducerSlot, SendError,
};
use brokerbench_nats::config::{NatsDriverConfig, NatsUrl};
use brokerbench_nats::NatsDriver;

use crate::common::shards::shards_merge_exactly;
use crate::common::*;
use crate::conformance::*;

pub static SUBJECT: Subject = Subject {
    family: "nats",
    // The streams' own count (JetStream's stored messages) is exactly what was acknowledged.
    counted: Counted {
        seconds: 2,
        sets: &["delete_streams=false"],
        prefix: "stream_prefix={prefix}",
        exact: true,
        publish_slack_us: None,
        stored: the_stream_holds_every_message,
        leftovers: Some(stream_names),
    },
    topology: Topology {
        sets: PARTITIONED,
        stored: None,
    },
    omb: omb_driver_files,
    unreachable: &["servers=nats://bench:hunter2@127.0.0.1:1"],
    bad_fields: &[
        ("ack_polcy=none", "did you mean `ack_policy`?"),
        ("storage=disk", "field `storage`"),
        ("discard=new", "field `discard`"),
        ("stream_prefix=a.b", "field `stream_prefix`"),
        ("bootstrap_servers=x:1", "field of the kafka driver"),
    ],
    // File storage: JetStream writes a message before it acknowledges it.
    kill: Kill::with(&["storage=file"], MayLose::Nothing),
    tls: Some(Tls {
        secret: Secret::InUrl("servers: tls://"),
        shown: "tls://brokerbench:***@",
        wrong_secret: &[
            "refused the credentials",
            "user 'brokerbench'",
            "password in servers",
        ],
        untrusted: &["UnknownIssuer", "ca_file"],
    }),
    // The consumer asks for one message at a time (pull_batch 1) and, with explicit acks, is
    // sent the next only once its ack is processed (max_ack_pending 1): one round trip per
    // message, while the producer keeps up to 1000 publishes in flight.
    // To receive the 150,000 messages of warm-up and window within the 1 s drain the consumer
    // would need a round trip under 27 µs.
    unconsumed: Some(Unconsumed {
        rate: "50000",
        sets: &["message_size=100B", "pull_batch=1", "max_ack_pending=1"],
        evidence: "num_ack_pending",
        exits_clean: true,
        check: Some(the_streams_pending_count_is_named),
    }),
    // The consumers stop pulling until 5,000 messages wait for them, while the stream keeps
    // only the newest 100.
    dropped: Some(Dropped {
        rate: "5000",
        seconds: 2,
        limit: &["max_msgs=100", "pull_batch=10"],
        backlog: "500KB",
        note: None,
    }),
};

conformance!(super::SUBJECT, tls, unconsumed, dropped);

/// The evidence names the consumer's pending count in the stream too.
fn the_streams_pending_count_is_named(s: &serde_json::Value) {
    let evidence = s["integrity"]["unconsumed_evidence"]
        .as_str()
        .unwrap_or_default();
    assert!(evidence.contains("num_pending"), "{s:#}");
}

/// Starts the managed server once for the suite, with TLS and a user (`broker up nats --tls`:
/// the same port takes plain clients that name no user); its client port.
fn nats_port() -> u16 {
    family_port("nats")
}

/// The managed server's client address.
fn nats() -> String {
    format!("127.0.0.1:{}", nats_port())
}

/// The stream names that start with `prefix`.
fn stream_names(prefix: &str) -> Vec<String> {
    let names = jetstream_at(&nats(), "$JS.API.STREAM.NAMES", serde_json::json!({}));
    names["streams"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|n| n.as_str())
                .filter(|n| n.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The kept run's stream holds every acknowledged message (the whole run's), and the
/// server's metrics were written as the run went.
fn the_stream_holds_every_message(prefix: &str, run: &Run, s: &serde_json::Value) {
    let streams = take_nats_streams_at(&nats(), &format!("{prefix}-"));
    assert_eq!(streams.len(), 1, "the run's one stream");
    let sent = s["integrity"]["whole_run"]["acknowledged"]
        .as_u64()
        .unwrap_or_else(|| s["total"]["acknowledged"].as_u64().unwrap());
    assert_eq!(
        streams[0].0["state"]["messages"].as_u64(),
        Some(sent),
        "{:#}",
        streams[0].0
    );
    let csv = run.file("broker-metrics.csv");
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains("server_messages_in_per_second"),
        "{csv}"
    );
    assert!(csv.lines().count() > 2, "{csv}");
}

/// The shape of OMB's driver-nats file: three replicas, which one server cannot hold, so it
/// is refused with the fixes; with one replica it runs, and since it names the managed
/// server's address, that server is watched as the managed one is.
fn omb_driver_files(port: u16) -> Vec<OmbFile> {
    let text = format!(
        "name: NATS\ndriverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver\nnatsHostUrl: nats://127.0.0.1:{port}\nreplicationFactor: 3\n"
    );
    vec![
        OmbFile {
            name: "nats-omb.yaml",
            text: text.clone(),
            sets: Vec::new(),
            note: "",
            expect: Expect::Refused(&[
                "not in a cluster",
                "--set replicas=1",
                "`brokerbench broker up nats --nodes 3`",
            ]),
            check: None,
        },
        OmbFile {
            name: "nats-omb.yaml",
            text,
            sets: vec!["replicas=1".into()],
            note: "OpenMessaging Benchmark NATS driver file",
            expect: Expect::Lossless,
            check: Some(watched_as_the_managed_server),
        },
    ]
}

/// A driver file that names the managed server's address: its process is sampled and its
/// metrics read, the file's address kept.
fn watched_as_the_managed_server(run: &Run, s: &serde_json::Value) {
    assert!(
        run.stderr.contains("names the managed NATS"),
        "{}",
        run.stderr
    );
    let broker = &run.manifest()["broker"];
    assert_eq!(broker["managed"], true, "{broker:#}");
    assert_eq!(
        broker["address"],
        format!("nats://{}", nats()),
        "{broker:#}"
    );
    let rss = s["resources"]["broker"]["rss_bytes_max"].as_u64();
    assert!(rss.is_some_and(|b| b > 1_000_000), "{:#}", s["resources"]);
    let metrics = &s["broker_metrics"];
    assert_eq!(
        metrics["messages_in"], metrics["messages_counted_by_brokerbench"],
        "{metrics:#}"
    );
}

#[test]
fn backlog_mode_stops_pulling_builds_and_drains_losslessly() {
    let _turn = serial();
    let run = family_run(
        "nats",
        NATS_DRIVER,
        &short_with("5000", 2, &["backlog.size=1MB", "backlog.drain_ratio=1"]),
    );
    assert_backlog(&run, 10_000, 2.0);
}

#[test]
fn partitions_memory_storage_msg_ids_and_two_members_stay_lossless_and_the_server_has_them() {
    let _turn = serial();
    // The stream is kept (delete_streams=false) so the server can say what it made: its
    // storage and duplicate window (NATS's defaults: file, 2 min), and whether the first
    // message it stored carries a Nats-Msg-Id header.
    let prefix = format!("readback{}", std::process::id());
    let stream_prefix = format!("stream_prefix={prefix}");
    // 2,000 msg/s: at 4,000 a host with both cores busy held 426 sends back past the run's end.
    let run = family_run(
        "nats",
        NATS_DRIVER,
        &short_with(
            "2000",
            2,
            &[
                "partitions_per_topic=4",
                "consumers_per_topic=2",
                "keys=random",
                "storage=memory",
                "msg_id=true",
                "duplicate_window=1m",
                "ack_policy=none",
                "delete_streams=false",
                &stream_prefix,
            ],
        ),
    );
    let streams = take_nats_streams_at(&nats(), &format!("{prefix}-"));
    let s = assert_lossless(&run);
    let shares = received_per_consumer(&s);
    assert_eq!(shares.len(), 2, "{s:#}");
    assert!(
        shares.iter().all(|&n| n > 0),
        "both members of the pull consumer receive: {shares:?}"
    );
    assert_eq!(streams.len(), 1, "the run's one stream");
    let (info, first, headers) = &streams[0];
    let config = &info["config"];
    assert_eq!(config["storage"], "memory", "{info:#}");
    assert_eq!(
        config["duplicate_window"].as_u64(),
        Some(Duration::from_secs(60).as_nanos() as u64),
        "{info:#}"
    );
    assert_eq!(
        info["state"]["messages"], s["total"]["acknowledged"],
        "the stream holds what was acknowledged: {info:#}"
    );
    assert!(
        headers.contains("Nats-Msg-Id: "),
        "the first stored message's headers: {headers:?} ({first:#})"
    );
}

#[test]
fn a_stream_limit_with_discard_new_fails_the_refused_publishes() {
    let _turn = serial();
    let run = family_run(
        "nats",
        NATS_DRIVER,
        &short_with(
            "2000",
            2,
            &["consumers_per_topic=0", "max_msgs=100", "discard=new"],
        ),
    );
    assert_eq!(run.code, 1, "completed with errors\nstderr: {}", run.stderr);
    let s = run.summary();
    let refused = s["errors"]["maximum_messages_exceeded"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(s["total"]["acknowledged"], 100, "{s:#}");
    assert_eq!(
        refused + 100,
        s["total"]["sent"].as_u64().unwrap(),
        "every publish beyond 100 refused: {s:#}"
    );
}

/// Publishes `count` enveloped messages through the driver's producer and waits until the
/// stream acknowledged every one.
fn publish_acknowledged(driver: &dyn Driver, count: u64) {
    let mut producer = driver
        .producer(ProducerSlot {
            topic: 0,
            producer: 0,
            thread: 0,
        })
        .unwrap();
    let mut payload = vec![0u8; 64];
    let (mut sent, mut acknowledged) = (0, 0);
    let started = Instant::now();
    while acknowledged < count {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{acknowledged} of {count} acknowledged"
        );
        while sent < count {
            Envelope {
                producer: 0,
                sequence: sent,
                intended_ns: 0,
            }
            .write(&mut payload);
            let message = OutgoingMessage {
                key: None,
                payload: &payload,
                sent_ns: 0,
            };
            match producer.send(message) {
                Ok(()) => sent += 1,
                Err(SendError::Backpressure) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        producer.poll(Duration::from_millis(100), &mut |ack| {
            assert_eq!(ack.result, Ok(()));
            acknowledged += 1;
        });
    }
}

/// What two members of one subscription say they left unread, counted as the ledger counts a
/// subscription: each place once (the larger count), summed over places.
fn held_by_subscription(members: [&mut Box<dyn Consumer>; 2]) -> (u64, Vec<String>) {
    let mut places = std::collections::BTreeMap::new();
    let mut evidence = Vec::new();
    for member in members {
        for unread in member.unread().expect("the server tells") {
            let held = places.entry(unread.place).or_insert(0);
            *held = unread.messages.max(*held);
            evidence.push(unread.evidence.to_string());
        }
    }
    (places.values().sum(), evidence)
}

#[test]
fn a_durable_consumer_holds_beyond_its_position_exactly_what_its_members_did_not_receive() {
    let _turn = serial();
    let address = nats();
    // By construction, not by a slow machine: one member asks for pull_batch messages while
    // the stream is empty and is not polled again, so the first messages published reach its
    // client and are never handed on (unless its request expires first, after 1 s); the other
    // receives from one pull (of at most pull_batch) while more may wait in its socket.
    let published = 1000;
    for ack_policy in ["explicit", "none"] {
        let config: NatsDriverConfig =
            brokerbench_model::yaml::from_str(&format!("ack_policy: {ack_policy}\npull_batch: 10"))
                .unwrap();
        let url = NatsUrl::parse(&format!("nats://{address}")).unwrap();
        let mut driver = NatsDriver::new(config, url);
        driver.connect().unwrap();
        let topology = brokerbench_driver::Topology {
            run_id: format!("unread{}{ack_policy}", std::process::id()),
            workload: "unread".into(),
            topics: 1,
            partitions_per_topic: 1,
            consumers_per_topic: 2,
            subscriptions_per_topic: 1,
            shard: None,
        };
        driver.prepare(&topology).unwrap();
        let slot = |member| ConsumerSlot {
            topic: 0,
            subscription: 0,
            member,
        };
        let mut prefetcher = driver.consumer(slot(1)).unwrap();
        let mut received = 0;
        prefetcher
            .poll(Duration::ZERO, &mut |_| received += 1)
            .unwrap();
        publish_acknowledged(&driver, published);
        let mut reader = driver.consumer(slot(0)).unwrap();
        while received == 0 {
            reader
                .poll(Duration::from_millis(100), &mut |_| received += 1)
                .unwrap();
        }
        if ack_policy == "explicit" {
            // The acks of what was received were sent with the last poll; the count includes
            // acks the server has not processed yet (see unread.rs), so they are given time.
            std::thread::sleep(Duration::from_millis(500));
        }
        let (held, evidence) = held_by_subscription([&mut reader, &mut prefetcher]);
        assert!(received < published, "{ack_policy}: {received}");
        assert_eq!(held, published - received, "{ack_policy}: {evidence:?}");
        assert!(
            evidence.iter().all(|e| e.contains("num_pending")),
            "{evidence:?}"
        );
        driver.cleanup().unwrap();
    }
}

#[test]
fn without_acknowledgements_what_reached_the_client_and_was_not_handed_on_is_unconsumed() {
    // With ack_policy none the server sends what a pull asks for at once: what waits in the
    // client when the drain ends is told apart from what waits in the stream.
    checks::unconsumed_with(
        &SUBJECT,
        &[
            "message_size=100B",
            "pull_batch=1",
            "max_ack_pending=1",
            "ack_policy=none",
        ],
        "reached the client",
    );
}

#[test]
fn plain_clients_go_on_beside_tls_ones_on_the_same_port() {
    let _turn = serial();
    nats_port();
    // The port of the TLS listener still takes plain clients that name no user.
    let plain = format!("driver: nats\nservers: nats://{}\n", nats());
    assert_lossless(&run_driver_text(&plain, &[]));
}

#[test]
fn nats_shards_merge_exactly() {
    let _turn = serial();
    nats();
    shards_merge_exactly(
        2,
        &[
            "partitions_per_topic=2",
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "rate=2000",
            "warmup=1s",
            "duration=2s",
        ],
        Some(NATS_DRIVER),
    );
}
