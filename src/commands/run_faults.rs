//! A run's faults: checked against the broker the run uses before anything starts, carried
//! out on the managed broker's nodes while the run measures, and measured into its summary.

use std::path::Path;

use brokerbench_driver::Led;
use brokerbench_engine::RunOutcome;
use brokerbench_family::Family;
use brokerbench_faults::{Injector, Leader, Nodes};
use brokerbench_model::faults::FaultAction;
use brokerbench_model::{SpecError, Specs};

use crate::families::REGISTRY;
use crate::BadInput;

/// The managed broker's nodes, as its status and its family's restart know them, and the
/// broker-side name whose leader `node: leader` hits.
struct ManagedNodes {
    family: &'static dyn Family,
    led: Option<Led>,
}

impl ManagedNodes {
    fn status(&self) -> Option<brokerbench_brokers::BrokerStatus> {
        let managed = self.family.managed(&brokerbench_brokers::home());
        managed.status().ok().flatten()
    }
}

impl Nodes for ManagedNodes {
    fn count(&self) -> u32 {
        self.status().map_or(0, |s| s.nodes.len().max(1) as u32)
    }

    fn pid(&self, id: u32) -> Option<u32> {
        let status = self.status()?;
        match status.nodes.iter().find(|n| n.id == id) {
            Some(node) => node.pid,
            None if id == 1 => Some(status.pid),
            None => None,
        }
    }

    fn restart(&self, id: u32) -> Result<u32, String> {
        let managed = self.family.managed(&brokerbench_brokers::home());
        managed.restart_node(id).map_err(|e| e.to_string())
    }

    fn leader(&self) -> Result<Leader, String> {
        let led = self.led.as_ref().ok_or_else(|| {
            format!(
                "the {} driver names nothing with a leader",
                self.family.name()
            )
        })?;
        let managed = self.family.managed(&brokerbench_brokers::home());
        let node = managed.leader(&led.name).map_err(|e| e.to_string())?;
        Ok(Leader {
            node,
            of: led.to_string(),
        })
    }
}

/// Faults that the broker cannot take (a node it does not have, a kill of a broker
/// brokerbench does not run) or in a sharded run: bad input, said before anything starts
/// (the managed broker too: one that does not run yet counts as the one node `up` starts).
/// A run on the managed broker first deletes what a killed run's partition left.
pub(super) fn check(specs: &Specs, managed: bool, sharded: bool) -> anyhow::Result<()> {
    if managed {
        brokerbench_faults::sweep_partitions();
    }
    let faults = &specs.workload.faults;
    if faults.is_empty() {
        return Ok(());
    }
    if sharded {
        return Err(BadInput(format!(
            "{}: field `faults`: faults are not available for a sharded run yet; run it unsharded",
            specs.workload_source
        ))
        .into());
    }
    let nodes = managed_nodes(specs, None);
    let count = managed.then(|| nodes.count().max(1));
    let field_error = |field: String, message: String| SpecError::Field {
        file: specs.workload_source.clone(),
        field,
        message,
    };
    brokerbench_faults::check(faults, count, nodes.family.name())
        .map_err(|e| field_error(e.field, e.message))?;
    let partition = faults
        .iter()
        .position(|f| f.action == FaultAction::Partition);
    if let (Some(i), true) = (partition, managed) {
        brokerbench_faults::partitions_possible(&nodes, nodes.family.name())
            .map_err(|why| field_error(format!("faults[{i}].action"), why))?;
    }
    Ok(())
}

fn managed_nodes(specs: &Specs, led: Option<Led>) -> ManagedNodes {
    let family = REGISTRY
        .get(specs.driver.name())
        .expect("a validated driver file names a registered family");
    ManagedNodes { family, led }
}

/// The injector of the workload's (checked) faults, None when it has none; it writes a
/// command fault's output into `out`. `led` is what the driver names for `node: leader`.
pub(super) fn injector(
    specs: &Specs,
    managed: bool,
    out: &Path,
    led: Option<Led>,
) -> Option<Injector> {
    let workload = &specs.workload;
    if workload.faults.is_empty() {
        return None;
    }
    let nodes = managed.then(|| Box::new(managed_nodes(specs, led)) as Box<dyn Nodes>);
    Some(Injector::new(
        workload.faults.clone(),
        workload.seed,
        out,
        nodes,
        now_ns,
    ))
}

fn now_ns() -> u64 {
    brokerbench_driver::Clock::process().now_ns()
}

/// Ends the faults and puts what each cost into the summary, with the notes that tie the
/// run's outages and stalls to them.
pub(super) fn measure_into(injector: Option<Injector>, outcome: &mut RunOutcome) {
    let Some(mut injector) = injector else {
        return;
    };
    let (injected, record) = injector.finish();
    let findings = brokerbench_faults::Findings {
        gaps: &outcome.ack_gaps,
        target_rate: outcome.summary.target_rate,
        integrity: &outcome.integrity_by_second,
    };
    let summary = &mut outcome.summary;
    summary.faults = brokerbench_faults::measure(&injected, &record, &findings);
    let notes = brokerbench_faults::notes(&summary.faults, summary);
    summary.notes.extend(notes);
}
