//! How the families name what a run creates on the broker.

/// `<prefix>-<workload>-<run id>-<topic>`: the name of topic `topic`'s object (a stream, an
/// address, a topic) in run `run_id`, the workload's name with what a broker's names should
/// not hold (anything but letters, digits, `-` and `_`) made `_`.
pub fn run_object_name(prefix: &str, workload: &str, run_id: &str, topic: u32) -> String {
    format!("{prefix}-{}-{run_id}-{topic}", safe_name(workload))
}

/// `name` with what a broker's names should not hold (anything but letters, digits, `-` and
/// `_`) made `_`.
pub fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The partition (0 to `partitions` − 1) of a message with `key`: FNV-1a, 64 bits, of the key,
/// modulo the partitions (the families whose own client picks the partition: Pulsar, Redis,
/// MQTT).
pub fn key_partition(key: &[u8], partitions: usize) -> usize {
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % partitions as u64) as usize
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_s_partition_is_its_fnv1a_hash_modulo_the_partitions() {
        // FNV-1a, 64 bits, of "a" is 0xaf63dc4c8601ec8c.
        assert_eq!(
            super::key_partition(b"a", usize::MAX),
            0xaf63dc4c8601ec8c % usize::MAX
        );
        assert_eq!(
            super::key_partition(b"a", 3),
            (0xaf63dc4c8601ec8c_u64 % 3) as usize
        );
        assert!((0..100u32).all(|k| super::key_partition(&k.to_le_bytes(), 7) < 7));
    }

    #[test]
    fn a_workload_name_is_made_safe() {
        assert_eq!(
            super::run_object_name("bb", "1 topic/1kb.x", "ab12", 3),
            "bb-1_topic_1kb_x-ab12-3"
        );
    }
}
