//! What a run records of the Kafka broker: its process's resources, its exporter's figures
//! and what they mean, and brokerbench's own live figures beside them.

use std::collections::BTreeMap;

use super::*;

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
    // The host is at least as busy as the broker and the client on it, over the same samples:
    // the processes' run times are read in 10-ms ticks, each end of each 1-s interval.
    let cores = |p: &serde_json::Value| {
        (p["cpu_user_pct_mean"].as_f64().unwrap() + p["cpu_system_pct_mean"].as_f64().unwrap())
            / 100.0
    };
    let h = &r["host"];
    let host_busy = ["user", "nice", "system", "irq", "guest"]
        .iter()
        .map(|f| h[format!("cpu_{f}_pct_mean")].as_f64().unwrap_or(0.0))
        .sum::<f64>()
        / 100.0
        * h["cpu_count"].as_f64().unwrap();
    let processes = cores(&r["broker"]) + cores(&r["client"]);
    assert!(
        host_busy >= processes - 0.04,
        "the host busy {host_busy:.2} cores, its broker and client {processes:.2}: {r:#}"
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
fn live_figures_are_served_in_the_prometheus_format() {
    let _turn = serial();
    kafka();
    let (run, text) = scrape_live_run(&[]);
    assert_lossless(&run);
    let samples = brokerbench_metrics::parse(&text);
    let acknowledged = samples
        .iter()
        .find(|s| s.name == "brokerbench_messages_acknowledged_total")
        .expect("acknowledged counter served");
    // 2 s into the measurement after a 1 s warm-up at 2000 msg/s: at least 4000 so far.
    assert!(acknowledged.value >= 4000.0, "{text}");
    assert!(samples
        .iter()
        .any(|s| s.name == "brokerbench_publish_latency_seconds"
            && s.label("quantile") == Some("0.99")));
    assert!(
        text.contains("# TYPE brokerbench_publish_latency_seconds summary"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE brokerbench_messages_sent_total counter"),
        "{text}"
    );
    promtool_finds_nothing(&text);
    dashboard_metrics_exist(&text, &["brokerbench_broker_queue_messages"]);
    assert!(
        samples
            .iter()
            .any(|s| s.name == "brokerbench_broker_cpu_percent"),
        "{text}"
    );
}

/// The columns of `broker-metrics.csv` by name, the rows inside the run's measurement
/// (strictly between its first and last second in timeseries.csv) only.
fn measured_broker_columns(run: &Run) -> BTreeMap<String, Vec<f64>> {
    let measured = measured_times(run);
    let (first, last) = (measured[0], measured[measured.len() - 1]);
    let text = run.file("broker-metrics.csv");
    let mut lines = text.lines();
    let names: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut columns = BTreeMap::<String, Vec<f64>>::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let time: f64 = cells[0].parse().unwrap();
        if time <= first || time >= last {
            continue;
        }
        for (name, cell) in names.iter().zip(&cells).skip(1) {
            if let Ok(v) = cell.parse() {
                columns.entry(name.to_string()).or_default().push(v);
            }
        }
    }
    columns
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// A steady run's broker figures: ratios within 0–1 and flat, messages in agreeing with
/// brokerbench's count; returns the columns and the broker's CPU (% of a core, user + system).
fn steady_kafka_run(rate: &str, extra: &[&str]) -> (BTreeMap<String, Vec<f64>>, f64) {
    // The idle ratios move by a few hundredths between the two rates, and a second's value
    // by as much (Kafka marks a handler's idle time when its next request comes): eleven
    // seconds' means keep the comparison apart from that noise.
    let sets = short(rate, 12);
    let run = run(&with_sets(&sets, extra));
    let s = assert_lossless(&run);
    let columns = measured_broker_columns(&run);
    for (name, values) in columns.iter().filter(|(n, _)| n.ends_with("_ratio")) {
        assert!(values.len() >= 6, "{name}: {values:?}");
        assert!(
            values.iter().all(|v| (0.0..=1.0).contains(v)),
            "{name} is a ratio: {values:?}"
        );
        // Flat load, flat figure: a long-run average read as a per-second value creeps one
        // way through the whole window, a step every second; noise around a level turns, or
        // stays put (a ratio at 1.0 for seconds, then a dip, does not creep). Seven distinct
        // rows at random go strictly one way with a chance of 2 in 5040.
        let rises = values.windows(2).all(|w| w[1] > w[0]);
        let falls = values.windows(2).all(|w| w[1] < w[0]);
        assert!(
            !rises && !falls,
            "{name} creeps through a steady window: {values:?}"
        );
    }
    let ledger = s["throughput"]["acknowledged_per_s"].as_f64().unwrap();
    let broker = &columns["messages_in_per_second"];
    assert!(
        (mean(broker) - ledger).abs() < rate_slack(&s, ledger),
        "the broker's messages in per second {broker:?}, brokerbench acknowledged {ledger}/s"
    );
    let r = &s["resources"]["broker"];
    let cpu = r["cpu_user_pct_mean"].as_f64().unwrap() + r["cpu_system_pct_mean"].as_f64().unwrap();
    (columns, cpu)
}

#[test]
fn broker_metrics_mean_what_they_say() {
    let _turn = serial();
    kafka();
    // One produce request per message, so that the broker's threads have work to show
    // without a load this shared host cannot offer.
    let managed = brokerbench_kafka::managed::Kafka::new(&brokerbench_brokers::home());
    let status = managed.status().unwrap().expect("running");
    let (address, pid) = (status.address, status.pid.to_string());
    let url = managed
        .metrics_url()
        .expect("the managed Kafka serves its metrics");
    let dir = tempfile::tempdir().unwrap();
    let driver = write(
        dir.path(),
        "unbatched.yaml",
        &format!(
            "driver: kafka\nbootstrap_servers: {address}\nreplication_factor: 1\n\
             producer_config: {{acks: \"1\", linger.ms: \"0\", batch.size: \"1\"}}\n"
        ),
    );
    let driver = driver.to_str().unwrap();
    let extra = [
        "--driver",
        driver,
        "--broker-metrics",
        url.as_str(),
        // Its pid, not `--broker-process kafka.Kafka`: the clusters' Kafka nodes may be
        // running beside it.
        "--broker-pid",
        pid.as_str(),
    ];
    let (low, low_cpu) = steady_kafka_run("200", &extra);
    // Unbatched, the managed Kafka here takes 3,000-3,500 produce requests a second at
    // most (`--set rate=max` with this driver file: about 0.5 ms of its CPU per request, five
    // in flight); 1,200 leaves room for a host with a core taken by something else.
    let (high, high_cpu) = steady_kafka_run("1200", &extra);
    assert!(
        high_cpu > low_cpu,
        "the broker works harder at 1200 requests/s: {low_cpu}% then {high_cpu}% of a core"
    );
    // The network threads are mostly idle at 200 requests/s (0.966–0.982 measured), and they
    // must not look idler at 1,200 beyond a second's noise: at these rates their busy share
    // moves by about as much as a dip that comes every third second whatever the rate (1.0,
    // 1.0, 0.905 at 200 throughout; with a core kept busy the means came out 0.966 then
    // 0.968 once, 0.982 then 0.963 another time).
    let noise = |v: &[f64]| {
        v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min)
    };
    let name = "network_processor_idle_ratio";
    assert!(
        mean(&low[name]) > 0.8,
        "{name} at 200 requests/s: {:?}",
        low[name]
    );
    assert!(
        mean(&high[name]) <= mean(&low[name]) + noise(&low[name]),
        "{name} rises with the broker's CPU ({low_cpu}% → {high_cpu}%): {:?} then {:?}",
        low[name],
        high[name]
    );
    // The request handlers do little of the broker's work here (a few percent busy), less
    // than a second's noise: they must not look busier at the low rate beyond that noise.
    let name = "request_handler_idle_ratio";
    assert!(
        mean(&high[name]) <= mean(&low[name]) + noise(&low[name]),
        "{name} rises with the broker's CPU ({low_cpu}% → {high_cpu}%): {:?} then {:?}",
        low[name],
        high[name]
    );
    // A ratio pinned at its ceiling while threads work measures nothing (the pools' summed
    // meter of a combined node, unhalved, reads 1 throughout).
    for name in ["request_handler_idle_ratio", "network_processor_idle_ratio"] {
        assert!(
            high[name].iter().any(|v| *v < 1.0),
            "{name}: {:?}",
            high[name]
        );
    }
    let names: Vec<&String> = high.keys().collect();
    assert!(
        names.iter().all(|n| brokerbench_metrics::follows_naming(n)),
        "{names:?}"
    );
}
