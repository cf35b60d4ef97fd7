use super::*;
use crate::workload::Rate;
use std::io::Write;

fn file(text: &str) -> tempfile_lite::TempFile {
    tempfile_lite::TempFile::new(text)
}

/// A tiny temp-file helper so the model crate needs no dev-dependency.
mod tempfile_lite {
    use super::*;
    pub struct TempFile(pub std::path::PathBuf);
    impl TempFile {
        pub fn new(text: &str) -> Self {
            static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("bb-spec-{}-{n}.yaml", std::process::id()));
            std::fs::File::create(&path)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            TempFile(path)
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// A family for these tests: `driver: test`, one optional field.
struct TestSchema;

#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct TestConfig {
    #[serde(default)]
    address: Option<String>,
}

impl DriverSchema for TestSchema {
    fn name(&self) -> &'static str {
        "test"
    }
    fn fields(&self) -> &'static [&'static str] {
        &["driver", "address"]
    }
    fn builtin_driver(&self) -> &'static str {
        "driver: test\n"
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: TestConfig = family::parse_driver(file, map)?;
        Ok(family::resolved(self.name(), &config))
    }
}

const FAMILIES: &[&dyn DriverSchema] = &[&TestSchema];

fn load_specs(
    workload: Option<&Path>,
    driver: Option<&Path>,
    overrides: &[String],
) -> Result<Specs, SpecError> {
    super::load_specs(FAMILIES, workload, driver, overrides)
}

#[test]
fn builtin_defaults_load_and_overrides_reach_both_files() {
    let sets = [
        "rate=20000".to_string(),
        "payload.kind=sensor".to_string(),
        "address=127.0.0.1:9999".to_string(),
    ];
    let specs = load_specs(None, None, &sets).unwrap();
    assert_eq!(specs.workload.name, "quickstart");
    assert_eq!(specs.workload.rate, Rate::PerSecond(20000.0));
    assert_eq!(specs.workload.payload, crate::Payload::Sensor);
    assert_eq!(specs.driver.name(), "test");
    assert_eq!(specs.driver_source, "built-in test driver");
    assert_eq!(
        specs.driver.redacted(),
        serde_json::json!({"driver": "test", "address": "127.0.0.1:9999"})
    );
}

#[test]
fn unknown_field_names_file_field_and_suggestion() {
    let f = file("name: x\nrat: 100\n");
    let err = load_specs(Some(&f.0), None, &[]).unwrap_err().to_string();
    assert!(err.contains(&f.0.display().to_string()), "{err}");
    assert!(err.contains("unknown field `rat`"), "{err}");
    assert!(err.contains("did you mean `rate`?"), "{err}");
}

#[test]
fn bad_variant_and_bad_value_name_the_field() {
    let f = file("payload: {kind: randon}\n");
    let err = load_specs(Some(&f.0), None, &[]).unwrap_err().to_string();
    assert!(err.contains("payload"), "{err}");
    assert!(err.contains("did you mean `random`?"), "{err}");

    let f = file("message_size: 12 apples\n");
    let err = load_specs(Some(&f.0), None, &[]).unwrap_err().to_string();
    assert!(
        err.contains("field `message_size`") && err.contains("unknown size unit"),
        "{err}"
    );

    let f = file("topics: many\n");
    let err = load_specs(Some(&f.0), None, &[]).unwrap_err().to_string();
    assert!(err.contains("field `topics`"), "{err}");
}

#[test]
fn bad_override() {
    let err = load_specs(None, None, &["rtae=5".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `rate`?"), "{err}");
    let err = load_specs(None, None, &["rate".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("field=value"), "{err}");
    let err = load_specs(None, None, &["rate=fast".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("field `rate`"), "{err}");
}

#[test]
fn workload_field_list_matches_the_struct() {
    let err = load_specs(None, None, &["nosuch=1".into()]).unwrap_err();
    assert!(matches!(err, SpecError::Override { .. }));
    let f = file("zzz: 1\n");
    let err = load_specs(Some(&f.0), None, &[]).unwrap_err().to_string();
    for field in WORKLOAD_FIELDS {
        assert!(err.contains(field), "serde lists {field}? {err}");
    }
}

#[test]
fn bad_driver_files() {
    let f = file("driver: tset\n");
    let err = load_specs(None, Some(&f.0), &[]).unwrap_err().to_string();
    assert!(err.contains("did you mean `test`?"), "{err}");
    let f = file("driver: test\naddres: x\n");
    let err = load_specs(None, Some(&f.0), &[]).unwrap_err().to_string();
    assert!(err.contains("did you mean `address`?"), "{err}");
    let f = file("address: x:1\n");
    let err = load_specs(None, Some(&f.0), &[]).unwrap_err().to_string();
    assert!(
        err.contains("add `driver: NAME`, one of: `driver: test`"),
        "{err}"
    );
}

#[test]
fn validate_detects_the_kind_of_file() {
    let f = file("driver: test\n");
    assert_eq!(validate_file(FAMILIES, &f.0).unwrap(), "driver");
    let f = file("rate: 10\n");
    assert_eq!(validate_file(FAMILIES, &f.0).unwrap(), "workload");
}

/// An OMB-format workload as OMB's own files are written (camelCase fields, minutes).
const OMB: &str = "name: 2 topics / 4 partitions / 1Kb\ntopics: 2\npartitionsPerTopic: 4\nkeyDistributor: KEY_ROUND_ROBIN\nmessageSize: 1024\nuseRandomizedPayloads: true\nrandomBytesRatio: 0.25\nrandomizedPayloadPoolSize: 50\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 3\nproducersPerTopic: 2\nproducerRate: 40000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 2\n";

#[test]
fn an_omb_workload_is_read_with_omb_fields_and_defaults() {
    let f = file(OMB);
    let specs = load_specs(Some(&f.0), None, &[]).unwrap();
    let w = &specs.workload;
    assert_eq!(w.name, "2-topics-4-partitions-1kb");
    assert_eq!(
        (
            w.topics,
            w.partitions_per_topic,
            w.producers_per_topic,
            w.consumers_per_topic
        ),
        (2, 4, 2, 3)
    );
    assert_eq!(w.keys, crate::KeyDistribution::RoundRobin);
    assert_eq!(w.message_size, 1024);
    assert_eq!(
        w.payload,
        crate::Payload::Random {
            pool: 50,
            random_ratio: 0.25
        }
    );
    assert_eq!(w.rate, Rate::PerSecond(40000.0));
    assert_eq!(w.duration, std::time::Duration::from_secs(120));
    assert_eq!(
        w.warmup,
        std::time::Duration::from_secs(60),
        "OMB's default warm-up"
    );
    assert!(specs
        .notes
        .iter()
        .any(|n| n.contains("OpenMessaging Benchmark")));
    assert!(specs.notes.iter().any(|n| n.contains("warm-up 1 minute")));
    // OMB's names and brokerbench's both work with --set on such a file; brokerbench's
    // are applied to the translation, so they win.
    let sets = [
        "producerRate=1000".to_string(),
        "subscriptionsPerTopic=0".to_string(),
        "warmup=2s".to_string(),
        "keyDistributor=RANDOM_NANO".to_string(),
    ];
    let w = load_specs(Some(&f.0), None, &sets).unwrap().workload;
    assert_eq!(w.rate, Rate::PerSecond(1000.0));
    assert_eq!(w.consumers_per_topic, 0, "no subscription: produce only");
    assert_eq!(w.warmup, std::time::Duration::from_secs(2));
    assert_eq!(w.keys, crate::KeyDistribution::Random);
    assert_eq!(
        validate_file(FAMILIES, &f.0).unwrap(),
        "OpenMessaging Benchmark workload"
    );
}

#[test]
fn an_omb_max_rate_file_runs_at_max_rate_as_omb_s_worker_does() {
    let max_rate = OMB.replace("producerRate: 40000", "producerRate: 10000000");
    let f = file(&max_rate);
    let specs = load_specs(Some(&f.0), None, &[]).unwrap();
    assert_eq!(specs.workload.rate, Rate::Max);
    assert!(
        specs.notes.iter().any(|n| n.contains("rate: max")),
        "{:?}",
        specs.notes
    );
    // The open loop at that rate, when the command line asks for it.
    let w = load_specs(Some(&f.0), None, &["rate=10000000".into()])
        .unwrap()
        .workload;
    assert_eq!(w.rate, Rate::PerSecond(10_000_000.0));
    // Below OMB's 10,000,000, a rate is an open loop as any other.
    let f = file(&OMB.replace("producerRate: 40000", "producerRate: 9999999"));
    let w = load_specs(Some(&f.0), None, &[]).unwrap().workload;
    assert_eq!(w.rate, Rate::PerSecond(9_999_999.0));
}

#[test]
fn omb_workload_mistakes_name_the_field_and_the_fix() {
    let error = |text: &str, sets: &[&str]| {
        let f = file(text);
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load_specs(Some(&f.0), None, &sets).unwrap_err().to_string()
    };
    let e = error(&OMB.replace("producersPerTopic", "producerPerTopic"), &[]);
    assert!(
        e.contains("`producerPerTopic`") && e.contains("did you mean `producersPerTopic`"),
        "{e}"
    );
    let e = error(&format!("{OMB}rate: 5000\n"), &[]);
    assert!(
        e.contains("`rate`") && e.contains("brokerbench field"),
        "{e}"
    );
    let e = error(&OMB.replace("producerRate: 40000", "producerRate: 0"), &[]);
    assert!(
        e.contains("`producerRate`") && e.contains("rate: find") && e.contains("brokerbench study"),
        "{e}"
    );
    // A rate given on the command line stands in for OMB's search.
    let f = file(&OMB.replace("producerRate: 40000", "producerRate: 0"));
    let w = load_specs(Some(&f.0), None, &["rate=300".into()])
        .unwrap()
        .workload;
    assert_eq!(w.rate, Rate::PerSecond(300.0));
    // Several subscriptions per topic, each with its consumers.
    let f = file(&OMB.replace("subscriptionsPerTopic: 1", "subscriptionsPerTopic: 3"));
    let w = load_specs(Some(&f.0), None, &[]).unwrap().workload;
    assert_eq!((w.subscriptions_per_topic, w.consumers_per_topic), (3, 3));
    // Backlog mode: OMB's GB are GiB; the drain ratio comes along.
    let f = file(&OMB.replace(
        "consumerBacklogSizeGB: 0",
        "consumerBacklogSizeGB: 8\nbacklogDrainRatio: 0.5",
    ));
    let specs = load_specs(Some(&f.0), None, &[]).unwrap();
    let backlog = specs.workload.backlog.unwrap();
    assert_eq!(backlog.size_bytes, 8 << 30);
    assert_eq!(backlog.drain_ratio, 0.5);
    assert!(specs.notes.iter().any(|n| n.contains("backlog mode")));
    let w = load_specs(Some(&f.0), None, &["consumerBacklogSizeGB=0".into()])
        .unwrap()
        .workload;
    assert!(w.backlog.is_none());
    let e = error(
        &OMB.replace("consumerBacklogSizeGB: 0", "consumerBacklogSizeGB: 8")
            .replace("subscriptionsPerTopic: 1", "subscriptionsPerTopic: 0"),
        &[],
    );
    assert!(
        e.contains("`consumerBacklogSizeGB`") && e.contains("needs consumers"),
        "{e}"
    );
    let e = error(
        &OMB.replace("testDurationMinutes: 2", "testDurationMinutes: 0"),
        &[],
    );
    assert!(
        e.contains("`testDurationMinutes`") && e.contains("without end"),
        "{e}"
    );
    let e = error(
        &OMB.replace(
            "keyDistributor: KEY_ROUND_ROBIN",
            "keyDistributor: ROUND_ROBIN",
        ),
        &[],
    );
    assert!(
        e.contains("keyDistributor") && e.contains("KEY_ROUND_ROBIN"),
        "{e}"
    );
    let e = error(OMB, &["producerRat=5"]);
    assert!(e.contains("did you mean `producerRate`"), "{e}");
}

#[test]
fn an_omb_payload_file_is_found_as_omb_finds_it_and_must_be_message_size_long() {
    // An OMB checkout: workloads/ and payload/ side by side.
    let root = std::env::temp_dir().join(format!("bb-omb-{}", std::process::id()));
    std::fs::create_dir_all(root.join("workloads")).unwrap();
    std::fs::create_dir_all(root.join("payload")).unwrap();
    std::fs::write(root.join("payload/p-100b.data"), [7u8; 100]).unwrap();
    let text = OMB
        .replace(
            "useRandomizedPayloads: true",
            "payloadFile: payload/p-100b.data",
        )
        .replace("messageSize: 1024", "messageSize: 100");
    let workload = root.join("workloads/w.yaml");
    std::fs::write(&workload, &text).unwrap();
    let specs = load_specs(Some(&workload), None, &[]).unwrap();
    assert_eq!(
        specs.workload.payload,
        crate::Payload::Binary {
            path: root.join("payload/p-100b.data")
        }
    );
    std::fs::write(
        &workload,
        text.replace("messageSize: 100", "messageSize: 200"),
    )
    .unwrap();
    let e = load_specs(Some(&workload), None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`payloadFile`") && e.contains("100 bytes and messageSize is 200"),
        "{e}"
    );
    std::fs::write(&workload, text.replace("p-100b.data", "missing.data")).unwrap();
    let e = load_specs(Some(&workload), None, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`payloadFile`") && e.contains("tried:"), "{e}");
    std::fs::remove_dir_all(root).unwrap();
}
