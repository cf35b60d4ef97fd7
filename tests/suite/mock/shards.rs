//! Shards on the in-memory mock family: a shard that never arrives.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::shards::*;
use crate::common::*;

#[test]
fn a_shard_that_never_arrives_is_named_and_the_others_stop_within_the_timeout() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let common: Vec<String> = [
        "--run-id",
        &format!("m{}", std::process::id()),
        "--coordinator",
        &format!("127.0.0.1:{}", free_port()),
        "--shard-timeout",
        "2s",
        "--set",
        "producers_per_topic=3",
        "--set",
        "rate=300",
        "--set",
        "driver=mock",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let began = Instant::now();
    let children: Vec<Child> = (0..2)
        .map(|i| start_shard(dir.path(), i, 3, &common))
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let (code, stderr, took) = finish(child, began, Duration::from_secs(60));
        assert_eq!(code, 1, "shard {i}: {stderr}");
        assert!(
            stderr.contains("shard 2 of 3 never arrived within 2s"),
            "{stderr}"
        );
        assert!(took < Duration::from_secs(20), "shard {i} took {took:?}");
        let manifest = json(&dir.path().join(format!("shard-{i}/manifest.json")));
        assert_eq!(manifest["status"], "failed");
    }
}
