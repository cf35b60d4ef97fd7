use super::*;

fn checked(yaml: &str) -> Result<Vec<Fault>, FieldError> {
    let raw: Vec<RawFault> = crate::yaml::from_str(yaml).expect("yaml");
    check_faults(&raw, Duration::from_secs(30))
}

fn refused(yaml: &str) -> FieldError {
    checked(yaml).expect_err("refused")
}

#[test]
fn a_schedule_of_each_action_is_read() {
    let faults = checked(
        "- {at: 8s, action: kill, node: 2, restart_after: 10s}\n\
         - {at: 20s, action: pause, node: random, for: 3s}\n\
         - {at: 25s, action: command, run: 'kill -STOP 1', undo: 'kill -CONT 1', for: 2s}\n\
         - {at: 1s, action: stop, node: 3}\n\
         - {at: 2s, action: pause, node: leader, for: 1s}\n",
    )
    .unwrap();
    assert_eq!(faults[4].node, Some(FaultNode::Leader));
    assert_eq!(serde_json::to_value(&faults[4]).unwrap()["node"], "leader");
    assert_eq!(faults[0].node, Some(FaultNode::Id(2)));
    assert_eq!(faults[0].restart_after, Some(Duration::from_secs(10)));
    assert_eq!(faults[1].node, Some(FaultNode::Random));
    assert_eq!(faults[2].lasts, Some(Duration::from_secs(2)));
    assert_eq!(faults[3].action, FaultAction::Stop);
    let written = serde_json::to_value(&faults[0]).unwrap();
    assert_eq!(written["at"], "8s");
    assert_eq!(written["restart_after"], "10s");
}

#[test]
fn each_bad_entry_names_its_field_and_the_fix() {
    let cases = [
        (
            "- {at: 40s, action: kill, node: 1}",
            "faults[0].at",
            "past the 30s",
        ),
        ("- {action: kill, node: 1}", "faults[0].at", "missing"),
        ("- {at: 1s, node: 1}", "faults[0].action", "missing"),
        (
            "- {at: 1s, action: pause, node: 1}",
            "faults[0].for",
            "missing",
        ),
        (
            "- {at: 1s, action: command, for: 2s}",
            "faults[0].run",
            "missing",
        ),
        ("- {at: 1s, action: kill}", "faults[0].node", "missing"),
        (
            "- {at: 1s, action: kill, node: 0}",
            "faults[0].node",
            "node id",
        ),
        (
            "- {at: 1s, action: kill, node: 1, for: 2s}",
            "faults[0].for",
            "restart_after",
        ),
        (
            "- {at: 1s, action: pause, node: 1, for: 2s, restart_after: 1s}",
            "faults[0].restart_after",
            "kill and stop",
        ),
        (
            "- {at: 1s, action: partition, node: 1}",
            "faults[0].for",
            "is missing",
        ),
        (
            "- {at: 1s, action: kill, node: primary}",
            "faults[0].node",
            "random or leader",
        ),
        (
            "- {at: 1s, action: kill, node: 1, run: x}",
            "faults[0].run",
            "command only",
        ),
        (
            "- {at: 1s, action: command, node: 1, run: x, for: 1s}",
            "faults[0].node",
            "does not go",
        ),
    ];
    for (yaml, field, says) in cases {
        let error = refused(yaml);
        assert_eq!(error.field, field, "{yaml}");
        assert!(error.message.contains(says), "{yaml}: {}", error.message);
    }
    assert_eq!(
        refused("- {at: 31s, action: stop, node: 1}").field,
        "faults[0].at"
    );
}

#[test]
fn a_flag_is_a_fault_map() {
    let map = fault_from_flag("at=8s,action=kill,node=2,restart_after=10s").unwrap();
    assert_eq!(map["node"], 2);
    assert_eq!(map["action"], "kill");
    let raw: RawFault = serde_json::from_value(map).unwrap();
    assert!(check_faults(&[raw], Duration::from_secs(30)).is_ok());
    assert!(fault_from_flag("at 8s").unwrap_err().contains("KEY=VALUE"));
}
