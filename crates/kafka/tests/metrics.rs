//! Kafka's metric set read from two scrapes of the JMX exporter's text: which series make
//! each figure, and how counters and idle times become rates and ratios.

use brokerbench_kafka::metrics::METRICS;
use brokerbench_metrics::{parse, BrokerMetrics, Endpoint, Reading, Scraper, MESSAGES_IN};

fn unused_scraper() -> Scraper {
    Scraper::new(Endpoint::new("http://unused").unwrap()).unwrap()
}

const SCRAPE_1: &str =
    "kafka_server_brokertopicmetrics_count{name=\"MessagesInPerSec\",} 1000.0\n\
    kafka_server_brokertopicmetrics_count{name=\"MessagesInPerSec\",topic=\"t\",} 1000.0\n\
    kafka_server_brokertopicmetrics_count{name=\"BytesInPerSec\",} 100000.0\n\
    kafka_server_kafkarequesthandlerpool_count{name=\"RequestHandlerAvgIdlePercent\",} 1.0E10\n\
    kafka_controller_kafkacontroller_value{name=\"ActiveControllerCount\",} 1.0\n\
    kafka_server_socket_server_metrics_io_wait_time_ns{listener=\"PLAINTEXT\",networkProcessor=\"0\",} 1.0E10\n\
    kafka_server_socket_server_metrics_io_wait_time_ns{listener=\"PLAINTEXT\",networkProcessor=\"1\",} 1.0E10\n\
    kafka_server_socket_server_metrics_io_wait_time_ns{listener=\"CONTROLLER\",networkProcessor=\"0\",} 1.0E10\n\
    kafka_log_logflushstats_mean{name=\"LogFlushRateAndTimeMs\",} 4.0\n\
    jvm_memory_used_bytes{area=\"heap\",} 4.2E8\n\
    jvm_memory_used_bytes{area=\"nonheap\",} 6.0E7\n\
    jvm_gc_collection_seconds_sum{gc=\"G1 Young Generation\",} 1.0\n\
    jvm_gc_collection_seconds_sum{gc=\"G1 Old Generation\",} 0.5\n";
// 2 s later: the two pools were idle 75% and 50% of the time (their shares add up to
// 2.5 s); the PLAINTEXT processors waited 1.8 and 1.0 s; the controller's all the time.
const SCRAPE_2: &str =
    "kafka_server_brokertopicmetrics_count{name=\"MessagesInPerSec\",} 6000.0\n\
    kafka_server_brokertopicmetrics_count{name=\"MessagesInPerSec\",topic=\"t\",} 6000.0\n\
    kafka_server_brokertopicmetrics_count{name=\"BytesInPerSec\",} 600000.0\n\
    kafka_server_kafkarequesthandlerpool_count{name=\"RequestHandlerAvgIdlePercent\",} 1.25E10\n\
    kafka_controller_kafkacontroller_value{name=\"ActiveControllerCount\",} 1.0\n\
    kafka_server_socket_server_metrics_io_wait_time_ns{listener=\"PLAINTEXT\",networkProcessor=\"0\",} 1.18E10\n\
    kafka_server_socket_server_metrics_io_wait_time_ns{listener=\"PLAINTEXT\",networkProcessor=\"1\",} 1.1E10\n\
    kafka_server_socket_server_metrics_io_wait_time_ns{listener=\"CONTROLLER\",networkProcessor=\"0\",} 1.2E10\n\
    jvm_gc_collection_seconds_sum{gc=\"G1 Young Generation\",} 1.2\n\
    jvm_gc_collection_seconds_sum{gc=\"G1 Old Generation\",} 0.5\n";

fn value(m: &BrokerMetrics, r: &Reading, key: &str) -> Option<f64> {
    let i = m.specs().iter().position(|s| s.key == key).unwrap();
    r.values[i]
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn counters_become_rates_and_gauges_are_scaled() {
    let mut m = BrokerMetrics::new(unused_scraper(), &METRICS);
    let first = m.take(&parse(SCRAPE_1), 1_000_000_000);
    assert_eq!(
        value(&m, &first, MESSAGES_IN),
        None,
        "no rate before a second scrape"
    );
    assert_eq!(value(&m, &first, "network_processor_idle_ratio"), None);
    assert!(close(
        value(&m, &first, "log_flush_seconds_mean_since_start"),
        0.004
    ));
    assert_eq!(
        value(&m, &first, "jvm_heap_used_bytes"),
        Some(4.2e8),
        "heap only, not nonheap"
    );
    let second = m.take(&parse(SCRAPE_2), 3_000_000_000);
    assert_eq!(
        value(&m, &second, MESSAGES_IN),
        Some(2500.0),
        "per-topic series excluded; 5000 in 2 s"
    );
    assert_eq!(value(&m, &second, "bytes_in_per_second"), Some(250_000.0));
    let gc = value(&m, &second, "jvm_gc_seconds_per_second").unwrap();
    assert!((gc - 0.1).abs() < 1e-9, "summed over collectors: {gc}");
    assert_eq!(
        value(&m, &second, "jvm_heap_used_bytes"),
        None,
        "absent in this scrape"
    );
    assert_eq!(value(&m, &second, "request_queue_size"), None);
}

#[test]
fn idle_times_become_ratios_of_the_interval_per_thread_and_pool() {
    let mut m = BrokerMetrics::new(unused_scraper(), &METRICS);
    m.take(&parse(SCRAPE_1), 1_000_000_000);
    let second = m.take(&parse(SCRAPE_2), 3_000_000_000);
    let handlers = value(&m, &second, "request_handler_idle_ratio");
    assert!(
        close(handlers, 0.625),
        "2.5 s idle of the pools' 4 s: {handlers:?}"
    );
    let network = value(&m, &second, "network_processor_idle_ratio");
    assert!(
        close(network, 0.7),
        "the mean of 0.9 and 0.5, the controller's listener left out: {network:?}"
    );
    let broker_only = SCRAPE_2.replace("ActiveControllerCount", "Other");
    m.take(&parse(SCRAPE_1), 1_000_000_000);
    let third = m.take(&parse(&broker_only), 3_000_000_000);
    assert!(
        close(value(&m, &third, "request_handler_idle_ratio"), 1.0),
        "one pool when the node is no controller: the meter as it is, 1 at most"
    );
}
