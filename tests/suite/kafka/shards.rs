//! One run in shards over the real Kafka: every shard's consumers in a group that spans the
//! processes, merged exactly.

use super::*;
use crate::common::shards::shards_merge_exactly;

#[test]
fn kafka_shards_merge_exactly() {
    let _turn = serial();
    kafka();
    shards_merge_exactly(
        2,
        &[
            "partitions_per_topic=2",
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "rate=4000",
            "warmup=1s",
            "duration=2s",
        ],
        None,
    );
}
