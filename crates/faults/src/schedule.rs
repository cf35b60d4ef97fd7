//! The schedule checked against the broker a run will use, and which node each fault hits.

use brokerbench_model::faults::{Fault, FaultNode};
use brokerbench_model::FieldError;

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

/// The node fault `index` hits among `count`, and how it was chosen.
pub(crate) fn node_of(node: FaultNode, index: usize, seed: u64, count: u32) -> (u32, String) {
    match node {
        FaultNode::Id(id) => (id, "as given".into()),
        FaultNode::Random => {
            let mixed = splitmix(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let id = 1 + (mixed % u64::from(count.max(1))) as u32;
            (id, format!("random among {count}, seed {seed}"))
        }
    }
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
        for index in 0..50 {
            let (id, chosen) = node_of(FaultNode::Random, index, 7, 3);
            assert!((1..=3).contains(&id));
            assert_eq!(node_of(FaultNode::Random, index, 7, 3).0, id);
            assert!(chosen.contains("seed 7"));
        }
        let picks: std::collections::HashSet<u32> = (0..50)
            .map(|i| node_of(FaultNode::Random, i, 7, 3).0)
            .collect();
        assert_eq!(picks.len(), 3, "every node is picked sometimes");
    }
}
