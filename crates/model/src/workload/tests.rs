use super::*;

fn parse(yaml: &str) -> Result<Workload, FieldError> {
    crate::yaml::from_str::<RawWorkload>(yaml)
        .unwrap()
        .validate()
}

#[test]
fn defaults_fill_an_empty_file() {
    let w = parse("{}").unwrap();
    assert_eq!(w.message_size, 100);
    assert_eq!(w.rate, Rate::PerSecond(50_000.0));
    assert_eq!(w.warmup, Duration::from_secs(5));
    assert_eq!(
        w.payload,
        Payload::Random {
            pool: 1000,
            random_ratio: 1.0
        }
    );
}

#[test]
fn units_and_max_rate() {
    let w =
        parse("message_size: 1KiB\nrate: max\nduration: 500ms\npayload: {kind: sensor}").unwrap();
    assert_eq!(w.message_size, 1024);
    assert_eq!(w.rate, Rate::Max);
    assert_eq!(w.duration, Duration::from_millis(500));
    assert_eq!(w.rate_per_producer(), None);
}

#[test]
fn message_smaller_than_header_is_rejected() {
    let e = parse("message_size: 10B").unwrap_err();
    assert_eq!(e.field, "message_size");
    assert!(e.message.contains("envelope header"), "{}", e.message);
}

#[test]
fn bad_values_name_the_field() {
    assert_eq!(parse("rate: -5").unwrap_err().field, "rate");
    assert_eq!(parse("topics: 0").unwrap_err().field, "topics");
    assert_eq!(parse("duration: 0s").unwrap_err().field, "duration");
    assert_eq!(parse("name: 'a b'").unwrap_err().field, "name");
    assert_eq!(
        parse("payload: {kind: random, pool: 0}").unwrap_err().field,
        "payload.pool"
    );
}

#[test]
fn schedule_resolution_defaults_and_bounds() {
    assert_eq!(
        parse("{}").unwrap().schedule_resolution,
        Duration::from_micros(100)
    );
    let w = parse("schedule_resolution: 1ms").unwrap();
    assert_eq!(w.schedule_resolution, Duration::from_millis(1));
    let e = parse("schedule_resolution: 50ms").unwrap_err();
    assert_eq!(e.field, "schedule_resolution");
    assert!(e.message.contains("at most 10ms"), "{}", e.message);
}

#[test]
fn durations_below_a_millisecond_keep_their_value_in_the_manifest() {
    let w = parse("schedule_resolution: 250us\nwarmup: 1500ms").unwrap();
    let json = serde_json::to_value(&w).unwrap();
    assert_eq!(json["schedule_resolution"], "250us");
    assert_eq!(json["warmup"], "1500ms");
    assert_eq!(json["duration"], "30s");
}

#[test]
fn backlog_sizes_and_drain_level() {
    let w = parse("message_size: 1KiB\nbacklog: {size: 1MiB, drain_ratio: 0.5}").unwrap();
    let b = w.backlog.unwrap();
    assert_eq!(b.size_bytes, 1 << 20);
    assert_eq!(b.messages(w.message_size), 1024);
    // Half of 1,024 messages may remain, but never fewer than OMB's 1,000.
    assert_eq!(b.drained_at(w.message_size), 1000);
    let b = parse("message_size: 100B\nbacklog: {size: 1MB, drain_ratio: 0.9}")
        .unwrap()
        .backlog
        .unwrap();
    assert_eq!(b.drained_at(100), 1000);
    let b = parse("backlog: {size: 10MB, drain_ratio: 0.5}")
        .unwrap()
        .backlog
        .unwrap();
    assert_eq!(b.drained_at(100), 50_000);
    assert_eq!(
        parse("backlog: {size: 1MB}")
            .unwrap()
            .backlog
            .unwrap()
            .drain_ratio,
        1.0
    );
    assert!(parse("{}").unwrap().backlog.is_none());
    let e = parse("backlog: {size: 1MB, drain_ratio: 2}").unwrap_err();
    assert_eq!(e.field, "backlog.drain_ratio");
    let e = parse("backlog: {size: 10B}").unwrap_err();
    assert_eq!(e.field, "backlog.size");
    let e = parse("consumers_per_topic: 0\nbacklog: {size: 1MB}").unwrap_err();
    assert_eq!(e.field, "backlog");
    assert!(e.message.contains("consumers_per_topic"), "{}", e.message);
}

#[test]
fn rate_is_split_over_producers() {
    let w = parse("topics: 2\nproducers_per_topic: 2\nrate: 10k").unwrap();
    assert_eq!(w.rate_per_producer(), Some(2500.0));
}
