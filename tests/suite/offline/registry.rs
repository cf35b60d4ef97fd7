//! Every registered family (the mock aside, which stands for no broker) has a conformance
//! subject in this suite, so a new family cannot land without the shared checks.

use brokerbench::families::REGISTRY;

/// The families the conformance suite has a subject of.
const SUBJECTS: [&str; 7] = [
    crate::kafka::SUBJECT.family,
    crate::rabbitmq::SUBJECT.family,
    crate::nats::SUBJECT.family,
    crate::artemis::SUBJECT.family,
    crate::pulsar::SUBJECT.family,
    crate::redis::SUBJECT.family,
    crate::mqtt::SUBJECT.family,
];

#[test]
fn every_registered_family_has_a_conformance_subject() {
    let registered: Vec<&str> = REGISTRY
        .names()
        .into_iter()
        .filter(|n| *n != "mock")
        .collect();
    let mut missing: Vec<&str> = registered
        .iter()
        .copied()
        .filter(|name| !SUBJECTS.contains(name))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "registered families without a conformance subject (tests/suite/conformance): {missing:?}"
    );
    for subject in SUBJECTS {
        assert!(registered.contains(&subject), "{subject} is not registered");
    }
}
