use super::*;

#[test]
fn java_properties_are_read_as_java_reads_them() {
    let text = "# comment\n  acks=all\nlinger.ms: 1\nbatch.size 131072\n! other comment\n\nsasl.jaas.config=a \\\n  b\nacks = 1\n";
    let pairs = java_properties(text);
    assert_eq!(
        pairs,
        [
            ("linger.ms".to_string(), "1".to_string()),
            ("batch.size".into(), "131072".into()),
            ("sasl.jaas.config".into(), "a b".into()),
            ("acks".into(), "1".into()),
        ]
    );
}

#[test]
fn names_become_safe_for_topics_and_folders() {
    assert_eq!(
        safe_name("1 topic / 1 partition / 1Kb"),
        "1-topic-1-partition-1kb"
    );
    assert_eq!(safe_name("max-rate-10-topics"), "max-rate-10-topics");
    assert_eq!(safe_name("///"), "omb");
}
