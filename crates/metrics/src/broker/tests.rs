use super::*;

fn unused_scraper() -> Scraper {
    Scraper::new(crate::Endpoint::new("http://unused").unwrap()).unwrap()
}

#[test]
fn the_naming_scheme_refuses_abbreviations_and_percentages() {
    assert!(follows_naming("request_handler_idle_ratio"));
    for bad in [
        "idle_pct",
        "in_per_s",
        "flush_ms_mean",
        "idle_percent",
        "Bytes",
    ] {
        assert!(!follows_naming(bad), "{bad}");
    }
}

#[test]
fn json_documents_flatten_to_samples_summed_over_arrays() {
    let doc: serde_json::Value = serde_json::from_str(
            r#"{"in_msgs": 7, "server_name": "x", "streams": [{"state": {"last_seq": 3}}, {"state": {"last_seq": 4}}]}"#,
        )
        .unwrap();
    let mut samples = Vec::new();
    flatten("jsz", &doc, &mut samples);
    let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "jsz.in_msgs",
            "jsz.streams.state.last_seq",
            "jsz.streams.state.last_seq"
        ]
    );
    const SPECS: &[MetricSpec] = &[MetricSpec {
        absent_is_zero: true,
        without_label: None,
        ..counter("stored", "jsz.streams.state.last_seq", None)
    }];
    static SET: MetricSet = MetricSet {
        source: "test",
        format: Format::Json { paths: &["/jsz"] },
        specs: SPECS,
    };
    let m = BrokerMetrics::new(unused_scraper(), &SET);
    assert_eq!(m.interpret(&samples, 1).totals, vec![Some(7.0)]);
    assert_eq!(
        m.interpret(&[], 1).totals,
        vec![Some(0.0)],
        "no streams yet: zero, not unknown"
    );
}

/// Three servers' `/jsz`: stream `a` on all three (R3; the second server leads it, the
/// others are behind), stream `b` on the first only (R1); then without the leader's.
#[test]
fn a_replicated_series_counts_once_at_its_highest() {
    let jsz = |streams: &[(&str, u64)]| {
        let detail: Vec<serde_json::Value> = streams
            .iter()
            .map(|(name, seq)| serde_json::json!({"name": name, "state": {"last_seq": seq}}))
            .collect();
        serde_json::json!({"account_details": [{"name": "$G", "stream_detail": detail}]})
    };
    let mut samples = Vec::new();
    for doc in [
        jsz(&[("a", 99), ("b", 7)]),
        jsz(&[("a", 100)]),
        jsz(&[("a", 98)]),
    ] {
        flatten("jsz", &doc, &mut samples);
    }
    let labels: Vec<(String, String)> = vec![
        ("account_details".into(), "$G".into()),
        ("stream_detail".into(), "b".into()),
    ];
    assert_eq!(samples[1].labels, labels, "{samples:?}");
    const SPECS: &[MetricSpec] = &[MetricSpec {
        combine: Combine::MaxPerSeries,
        without_label: None,
        ..counter(
            "stored",
            "jsz.account_details.stream_detail.state.last_seq",
            None,
        )
    }];
    static SET: MetricSet = MetricSet {
        source: "test",
        format: Format::Json { paths: &["/jsz"] },
        specs: SPECS,
    };
    let m = BrokerMetrics::new(unused_scraper(), &SET);
    assert_eq!(m.interpret(&samples, 1).totals, vec![Some(107.0)]);
    let leader_down: Vec<Sample> = [&samples[..2], &samples[3..]].concat();
    assert_eq!(m.interpret(&leader_down, 1).totals, vec![Some(106.0)]);
}

/// Answers one HTTP request with each of `bodies` in turn on a port of its own, then
/// closes it; the endpoint's URL.
fn serve(bodies: &[&'static str]) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies = bodies.to_vec();
    std::thread::spawn(move || {
        for body in bodies {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all((head + body).as_bytes()).unwrap();
        }
    });
    url
}

#[test]
fn a_node_that_does_not_answer_counts_with_its_last_answer_and_alone_with_none() {
    const SPECS: &[MetricSpec] = &[
        MetricSpec {
            without_label: None,
            ..gauge("stored", "jsz.messages", None, 1.0)
        },
        MetricSpec {
            without_label: None,
            per_node: true,
            ..counter("written", "jsz.seq", None)
        },
    ];
    static SET: MetricSet = MetricSet {
        source: "test",
        format: Format::Json { paths: &["/jsz"] },
        specs: SPECS,
    };
    let scraper = |url: &str| Scraper::new(crate::Endpoint::new(url).unwrap()).unwrap();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    // Node 1 answers three times, node 3 twice and then no more.
    let first = scraper(&serve(&[
        r#"{"messages": 5, "seq": 100}"#,
        r#"{"messages": 6, "seq": 110}"#,
        r#"{"messages": 7, "seq": 130}"#,
    ]));
    let third = scraper(&serve(&[
        r#"{"messages": 10, "seq": 90}"#,
        r#"{"messages": 10, "seq": 91}"#,
    ]));
    let mut m = BrokerMetrics::new(first, &SET).with_other_nodes(1, vec![(3, third)]);
    assert_eq!(
        m.columns(),
        ["stored", "written", "written_node1", "written_node3"]
    );
    let second = 1_000_000_000;
    assert_eq!(
        m.read(second).unwrap().values,
        [Some(15.0), None, None, None]
    );
    assert_eq!(
        m.read(2 * second).unwrap().values,
        [Some(16.0), Some(11.0), Some(10.0), Some(1.0)]
    );
    assert_eq!(
        m.read(3 * second).unwrap().values,
        [Some(17.0), Some(20.0), Some(20.0), None],
        "node 3's last answer in the cluster's figures, nothing for node 3 alone"
    );
    let mut none = BrokerMetrics::new(scraper(&closed), &SET);
    assert!(none.read(1).is_err(), "no node answered");
    assert_eq!(
        none.columns(),
        ["stored", "written"],
        "one node: no per-node columns"
    );
}

#[test]
fn a_star_in_a_metric_matches_any_run_of_characters_and_nothing_else_does() {
    let metric = "read.value.*.RoutedMessageCount";
    assert!(name_matches(
        metric,
        "read.value.org.apache.activemq.artemis:address=\"a.b\",broker=\"x\".RoutedMessageCount"
    ));
    assert!(!name_matches(metric, "read.value.x.UnRoutedMessageCount"));
    assert!(name_matches(
        "read.value.*RoutedMessageCount",
        "read.value.x.UnRoutedMessageCount"
    ));
    assert!(!name_matches(metric, "read.value.RoutedMessageCount"));
    assert!(name_matches("varz.in_msgs", "varz.in_msgs"));
    assert!(!name_matches("varz.in_msgs", "varz.in_msgs_total"));
}

#[test]
fn a_jolokia_error_answer_is_an_error_and_no_match_is_no_samples() {
    let error = serde_json::json!({"status": 403, "error": "forbidden"});
    let e = answered(error, "http://x/jolokia").unwrap_err();
    assert!(e.to_string().contains("403"), "{e}");
    assert!(e.to_string().contains("forbidden"), "{e}");
    let none = serde_json::json!({"status": 404, "error": "no MBean"});
    assert_eq!(answered(none, "u").unwrap(), None);
    let fine = serde_json::json!({"status": 200, "value": {}});
    assert!(answered(fine, "u").unwrap().is_some());
    let nats = serde_json::json!({"in_msgs": 3});
    assert!(answered(nats, "u").unwrap().is_some());
}
