//! Resource monitoring and broker metrics during real runs against the managed Kafka.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_run_records_broker_client_and_host_resources() {
    let _turn = serial();
    kafka();
    let sets = short("5000", 3);
    let run = run(&with_sets(&sets, &[]));
    let s = assert_lossless(&run);
    let r = &s["resources"];
    assert!(r["samples"].as_u64().unwrap() >= 3, "{r:#}");
    let broker_cpu = r["broker"]["cpu_user_pct_mean"].as_f64().unwrap()
        + r["broker"]["cpu_system_pct_mean"].as_f64().unwrap();
    assert!(
        broker_cpu > 1.0,
        "the broker works while it takes 5000 msg/s: {r:#}"
    );
    assert!(
        r["broker"]["rss_bytes_max"].as_u64().unwrap() > 100 << 20,
        "a JVM broker: {r:#}"
    );
    assert!(
        r["host"]["loopback_packets"].as_u64().unwrap() > 100,
        "traffic goes over loopback: {r:#}"
    );
    let header = run
        .file("resources.csv")
        .lines()
        .next()
        .unwrap()
        .to_string();
    let documented = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/monitor/resources-columns.txt"
    ))
    .unwrap();
    let documented: Vec<&str> = documented
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(header.split(',').collect::<Vec<_>>(), documented);
    assert!(run.stdout.contains("broker       cpu"), "{}", run.stdout);
}

#[test]
fn a_broker_pid_that_disappears_mid_run_is_reported_not_fatal() {
    let _turn = serial();
    kafka();
    let mut stand_in = std::process::Command::new("sleep")
        .arg("2")
        .spawn()
        .unwrap();
    let pid = stand_in.id().to_string();
    let reaper = std::thread::spawn(move || stand_in.wait());
    let sets = short("1000", 4);
    let run = run(&with_sets(&sets, &["--broker-pid", &pid]));
    reaper.join().unwrap().unwrap();
    let s = assert_lossless(&run);
    assert!(
        s["resources"]["broker"]["lost_at_ns"].as_u64().is_some(),
        "{:#}",
        s["resources"]
    );
    assert!(
        s["notes"].to_string().contains("stopped running"),
        "{:#}",
        s["notes"]
    );
}

#[test]
fn live_figures_are_served_in_the_prometheus_format() {
    let _turn = serial();
    kafka();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let url = format!("http://{address}/metrics");
    let dir = tempfile::tempdir().unwrap();
    let folder = results_folder(dir.path());
    let scraper = std::thread::spawn(move || {
        // 2 s into the 4 s measurement, counted from the run's own rows.
        wait_for_measured_seconds(&folder, 2);
        brokerbench_metrics::scrape(&url, Duration::from_secs(2))
    });
    let sets = short("2000", 4);
    let run = run_in(dir, &with_sets(&sets, &["--metrics-listen", &address]));
    assert_lossless(&run);
    let text = scraper.join().unwrap().expect("scraped during the run");
    let samples = brokerbench_metrics::parse(&text);
    let acknowledged = samples
        .iter()
        .find(|s| s.name == "brokerbench_acknowledged_per_second")
        .expect("acknowledged rate served");
    assert!((1500.0..2500.0).contains(&acknowledged.value), "{text}");
    assert!(samples
        .iter()
        .any(|s| s.name == "brokerbench_publish_latency_seconds"
            && s.label("quantile") == Some("0.99")));
    assert!(
        samples
            .iter()
            .any(|s| s.name == "brokerbench_broker_cpu_percent"),
        "{text}"
    );
}

#[test]
fn the_brokers_message_count_matches_what_brokerbench_acknowledged() {
    let _turn = serial();
    kafka();
    let sets = short("10000", 3);
    let run = run(&with_sets(&sets, &[]));
    let s = assert_lossless(&run);
    let m = &s["broker_metrics"];
    assert_eq!(m["source"], "kafka", "{s:#}");
    let broker = m["messages_in"]
        .as_f64()
        .expect("the broker's count over the run");
    let acknowledged = s["total"]["acknowledged"].as_f64().unwrap();
    assert!(acknowledged >= 30_000.0);
    assert!(
        (broker - acknowledged).abs() / acknowledged < 0.01,
        "MessagesInPerSec counted {broker}, brokerbench acknowledged {acknowledged}"
    );
    let rate = m["means"]["messages_in_per_s"].as_f64().unwrap();
    assert!(
        (8_000.0..12_000.0).contains(&rate),
        "the broker's rate during the window: {rate}"
    );
    assert!(run.file("broker-metrics.csv").lines().count() >= 4);
}
