//! How the families name what a run creates on the broker.

/// `<prefix>-<workload>-<run id>-<topic>`: the name of topic `topic`'s object (a stream, an
/// address, a topic) in run `run_id`, the workload's name with what a broker's names should
/// not hold (anything but letters, digits, `-` and `_`) made `_`.
pub fn run_object_name(prefix: &str, workload: &str, run_id: &str, topic: u32) -> String {
    let workload: String = workload
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{prefix}-{workload}-{run_id}-{topic}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_workload_name_is_made_safe() {
        assert_eq!(
            super::run_object_name("bb", "1 topic/1kb.x", "ab12", 3),
            "bb-1_topic_1kb_x-ab12-3"
        );
    }
}
