use super::*;
use crate::test_support::summary;

fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting with '{start}' in\n{text}"))
}

#[test]
fn thousands() {
    assert_eq!(group_thousands(0), "0");
    assert_eq!(group_thousands(999), "999");
    assert_eq!(group_thousands(1_000), "1,000");
    assert_eq!(group_thousands(1_800_000), "1,800,000");
    assert_eq!(format_count_rate(49_998.4), "49,998");
    assert_eq!(format_count_rate(2.5), "2.50");
}

#[test]
fn a_line_per_fault_says_what_it_cost() {
    use brokerbench_model::faults::{FaultLatency, FaultReport};
    let mut s = summary();
    let latency = |ms| FaultLatency {
        publish_p99_ms: Some(ms),
        ..FaultLatency::default()
    };
    s.faults = vec![
        FaultReport {
            index: 1,
            action: "kill".into(),
            node: Some(2),
            pid: Some(4242),
            injected_at_s: 7.0,
            ended_at_s: Some(20.1),
            restarted_pid: Some(4343),
            unavailable_s: 9.41,
            recovered_after_s: Some(15.0),
            before: latency(3.0),
            during: FaultLatency {
                failed: 5075,
                lost: Some(20_132),
                duplicated: Some(0),
                out_of_order: Some(2),
                ..latency(9330.0)
            },
            leader_before: Some(2),
            leader_after: Some(1),
            ..FaultReport::default()
        },
        FaultReport {
            index: 2,
            action: "stop".into(),
            node: Some(3),
            ..FaultReport::default()
        },
    ];
    let text = terminal_summary(&s);
    assert_eq!(
            line(&text, "fault 1"),
            "fault 1      kill of node 2 (pid 4242) at 7.0 s, started again at 20.1 s: unavailable 9.41 s, recovered after 15.0 s; publish p99 3.00 ms before, 9.33 s during; 5,075 sends failed; 20,132 acknowledged then lost; 2 out of order; leader node 2 → node 1"
        );
    assert_eq!(
        line(&text, "fault 2"),
        "fault 2      stop of node 3: not injected"
    );
}

#[test]
fn clean_run() {
    let text = terminal_summary(&summary());
    assert_eq!(
        text.lines().next().unwrap(),
        "quickstart on kafka — complete, open-loop at 60,000 msg/s, 30.0 s measured"
    );
    assert_eq!(
        line(&text, "throughput"),
        "throughput   59,998 msg/s acknowledged   6.00 MB/s   received 59,997 msg/s"
    );
    assert_eq!(
            line(&text, "latency"),
            "latency            p50       p75       p90       p95       p99     p99.9    p99.99       max"
        );
    assert_eq!(
            line(&text, "  publish"),
            "  publish      1.23 ms   2.46 ms   3.69 ms   4.92 ms  12.30 ms  24.60 ms  49.20 ms 123.00 ms"
        );
    assert_eq!(
        line(&text, "integrity"),
        "integrity    whole run: sent 1,800,000  acknowledged 1,800,000  received 1,800,000  \
             lost 0  duplicated 0  out of order 0  (lossless)"
    );
    assert_eq!(line(&text, "errors"), "errors       none");
    assert_eq!(
            line(&text, "client"),
            "client       2.10 CPU-s per million messages (user 3.00 s, system 0.78 s), peak RSS 45 MiB"
        );
    assert!(!text.contains("notes"));
    assert!(!text.contains("consumers"));
}

#[test]
fn a_run_that_acknowledged_nothing_gives_its_cpu_and_no_cost_per_message() {
    let mut s = summary();
    s.client.cpu_s_per_million_messages = None;
    s.integrity.undelivered = 27;
    let text = terminal_summary(&s);
    assert_eq!(
            line(&text, "client"),
            "client       no CPU-s per million messages (none acknowledged) (user 3.00 s, system 0.78 s), peak RSS 45 MiB"
        );
    assert!(
            line(&text, "integrity").ends_with(
                "undelivered (sent at most once, never received) 27  (nothing acknowledged lost; 27 sent at most once never arrived)"
            ),
            "{text}"
        );
}

#[test]
fn the_host_line_says_how_many_cores_were_busy() {
    let mut s = summary();
    s.resources = Some(brokerbench_model::resources::ResourceSummary {
        host: brokerbench_model::resources::HostResources {
            cpu_count: 2,
            cpu_user_pct_mean: Some(40.0),
            cpu_system_pct_mean: Some(5.0),
            cpu_irq_pct_mean: Some(1.0),
            cpu_iowait_pct_mean: Some(0.5),
            ..Default::default()
        },
        ..Default::default()
    });
    let text = terminal_summary(&s);
    assert!(
        line(&text, "host").starts_with(
            "host         cpu 40.0% usr 5.0% sys 0.5% iowait of 2 cores (0.92 busy), "
        ),
        "{text}"
    );
}

#[test]
fn consumer_shares() {
    let mut s = summary();
    let share = |member, received| ConsumerShare {
        topic: 0,
        subscription: 0,
        member,
        received,
    };
    s.consumers = vec![share(0, 900_000), share(1, 900_001)];
    let text = terminal_summary(&s);
    assert_eq!(
        line(&text, "consumers"),
        "consumers    received  topic 0 sub 0 #0: 900,000  topic 0 sub 0 #1: 900,001"
    );
    s.consumers = (0..10).map(|m| share(m, 1_000 + u64::from(m))).collect();
    let text = terminal_summary(&s);
    assert_eq!(
        line(&text, "consumers"),
        "consumers    received between 1,000 and 1,009 each by 10 consumers"
    );
}

#[test]
fn lossy_run_is_loud() {
    let mut s = summary();
    s.integrity.lost = 1_234;
    s.integrity.duplicated = 2;
    s.errors.insert("msg_timed_out".into(), 1_234);
    let text = terminal_summary(&s);
    assert!(text.lines().next().unwrap().contains("NOT CLEAN"), "{text}");
    assert!(
        line(&text, "integrity").ends_with("LOSSY: 1,234 lost"),
        "{text}"
    );
    assert!(!text.contains("lossless"));
    assert_eq!(
        line(&text, "errors"),
        "errors       msg_timed_out=1,234 (whole run)"
    );
}

#[test]
fn duplicates_are_not_clean() {
    let mut s = summary();
    s.integrity.duplicated = 3;
    let text = terminal_summary(&s);
    assert!(
        line(&text, "integrity").ends_with("NOT CLEAN: 3 duplicated"),
        "{text}"
    );
}

#[test]
fn no_consumers_and_max_rate() {
    let mut s = summary();
    s.mode = "max-rate".into();
    s.target_rate = None;
    s.status = RunStatus::Interrupted;
    s.integrity.checked = false;
    // A shard of a run has consumers and leaves the check to the merge.
    let text = terminal_summary(&s);
    assert!(line(&text, "integrity").ends_with("`brokerbench merge` checks it)"));
    s.consumers.clear();
    s.total.received = 0;
    s.latency.end_to_end = LatencySummary::default();
    s.client_bound = true;
    s.notes
        .push("CLIENT-BOUND: schedule lag kept growing".into());
    s.notes.push("warm-up was 5 s".into());
    let text = terminal_summary(&s);
    assert!(text.starts_with(
        "quickstart on kafka — INTERRUPTED, max-rate (closed loop: latency is not open-loop)"
    ));
    assert!(!text.contains("end-to-end"), "{text}");
    assert!(!line(&text, "throughput").contains("received"));
    assert!(line(&text, "integrity").ends_with("loss NOT CHECKED (no consumers)"));
    assert!(line(&text, "notes").starts_with("notes        - CLIENT-BOUND"));
    assert_eq!(text.matches("CLIENT-BOUND").count(), 1, "{text}");
    assert!(
        text.contains("\n             - warm-up was 5 s\n"),
        "{text}"
    );
}
