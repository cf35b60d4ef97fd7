//! The schedule checked against the broker a run will use, and which node each fault hits.

use brokerbench_model::faults::{Fault, FaultAction, FaultNode};
use brokerbench_model::FieldError;

use crate::nodes::Leader;

/// Checks the faults against the broker: `nodes` is the managed broker's node count, None for
/// a broker brokerbench does not run (only `command` faults reach it).
pub fn check(faults: &[Fault], nodes: Option<u32>, family: &str) -> Result<(), FieldError> {
    for (i, fault) in faults.iter().enumerate() {
        let action = fault.action.name();
        match (fault.node, nodes) {
            (None, _) => {}
            (Some(_), None) => {
                return Err(FieldError::new(
                    &format!("faults[{i}].action"),
                    format!("{action} acts on a node of the managed {family}, and this run's driver file names a broker of its own: leave the address out to use the managed one, or use action: command with your own tool (run, undo, for)"),
                ))
            }
            (Some(_), Some(count)) if count < 2 && fault.action == FaultAction::Partition => {
                return Err(FieldError::new(
                    &format!("faults[{i}].action"),
                    format!("a partition cuts a node off from the others, and the managed {family} has {count} node: start a cluster (brokerbench broker up {family} --nodes 3)"),
                ))
            }
            (Some(FaultNode::Id(id)), Some(count)) if id > count => {
                return Err(FieldError::new(
                    &format!("faults[{i}].node"),
                    format!("{id}, but the managed {family} has {count} node(s): give 1 to {count}, or start more (brokerbench broker up {family} --nodes N)"),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The node fault `index` hits among `count` (`leader`: who leads now), and how it was chosen.
pub(crate) fn node_of(
    node: FaultNode,
    index: usize,
    seed: u64,
    count: u32,
    leader: Result<Leader, String>,
) -> Result<(u32, String), String> {
    Ok(match node {
        FaultNode::Id(id) => (id, "as given".into()),
        FaultNode::Random => {
            let mixed = splitmix(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let id = 1 + (mixed % u64::from(count.max(1))) as u32;
            (id, format!("random among {count}, seed {seed}"))
        }
        FaultNode::Leader => {
            let leader = leader?;
            (leader.node, format!("leader of {} at injection", leader.of))
        }
    })
}

/// SplitMix64's finalizer: a well-spread value from any seed.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_node_is_in_range_and_repeats_with_the_seed() {
        let random = |index| node_of(FaultNode::Random, index, 7, 3, Err("unknown".into()));
        for index in 0..50 {
            let (id, chosen) = random(index).unwrap();
            assert!((1..=3).contains(&id));
            assert_eq!(random(index).unwrap().0, id);
            assert!(chosen.contains("seed 7"));
        }
        let picks: std::collections::HashSet<u32> = (0..50).map(|i| random(i).unwrap().0).collect();
        assert_eq!(picks.len(), 3, "every node is picked sometimes");
    }

    #[test]
    fn the_leader_is_the_node_the_broker_names_or_no_node_at_all() {
        let leader = Leader {
            node: 2,
            of: "stream s".into(),
        };
        assert_eq!(
            node_of(FaultNode::Leader, 0, 7, 3, Ok(leader)),
            Ok((2, "leader of stream s at injection".into()))
        );
        assert_eq!(
            node_of(FaultNode::Leader, 0, 7, 3, Err("electing".into())),
            Err("electing".into())
        );
    }
}
