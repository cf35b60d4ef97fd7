//! The managed-broker lifecycle, written once. `up`, `down` and `status` are the same for
//! every managed broker — take the folder's lock, find the process this folder started (its
//! command line names our configuration), wait until a running one answers, else start one
//! and wait until it answers, and take a half-started one down again — and a broker supplies
//! only what differs, as a [`Lifecycle`]: its checks, how it starts, how it tells that it
//! answers, how it stops, and what `down` removes.

use std::path::PathBuf;

mod commands;

use crate::{managed, BrokerError, BrokerStatus};

/// What differs between managed brokers.
pub trait Lifecycle {
    /// What a start in progress holds (the spawned process, the port it took, ...).
    type Starting;

    /// The broker's folder; its `.lock` serializes `up` and `down`.
    fn dir(&self) -> PathBuf;
    /// Settings and installation checks, before anything is touched.
    fn check(&self) -> Result<(), BrokerError> {
        Ok(())
    }
    /// The running process this folder started, if any.
    fn running_pid(&self) -> Option<u32>;
    /// The status of the running process `pid`.
    fn status_of(&self, pid: u32) -> BrokerStatus;
    /// Whether the running broker `status` is what `up` asked for (size, settings).
    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError>;
    /// Starts node `id` of the running cluster again, as it was (its port, data and
    /// settings); its pid.
    fn start_again(&self, id: u32) -> Result<u32, BrokerError>;
    /// Waits until the already running broker `status` answers.
    fn wait_running(&self, status: &BrokerStatus) -> Result<(), BrokerError>;
    /// Writes the configuration and spawns the broker.
    fn start(&self) -> Result<Self::Starting, BrokerError>;
    /// Waits until the started broker answers; its status.
    fn wait_started(&self, starting: &mut Self::Starting) -> Result<BrokerStatus, BrokerError>;
    /// Takes a broker that failed to start down again and removes what its start left.
    fn abandon(&self, starting: Self::Starting);
    /// Stops the process `pid` (ours).
    fn stop(&self, pid: u32) -> Result<(), BrokerError>;
    /// Files `down` removes once the broker is stopped (pid file, state).
    fn leftovers(&self) -> Vec<PathBuf>;
}

/// Starts the broker unless it runs; its status and whether it was running before.
pub fn up<L: Lifecycle + ?Sized>(broker: &L) -> Result<(BrokerStatus, bool), BrokerError> {
    broker.check()?;
    let _lock = managed::create_and_lock(&broker.dir())?;
    let mut gone = None;
    if let Some(pid) = broker.running_pid() {
        match use_running(broker, pid) {
            Ok(status) => return Ok((status, true)),
            // It was on its way out (SIGKILLed just before: a big process takes a while to
            // exit on a busy host) and is gone now: start one afresh.
            Err(_) if broker.running_pid().is_none() => gone = Some(pid),
            Err(error) => return Err(error),
        }
    }
    let mut starting = broker.start()?;
    match broker.wait_started(&mut starting) {
        Ok(mut status) => {
            if let Some(pid) = gone {
                let said = format!(
                    "the {} found running (pid {pid}) exited while waited for: started afresh",
                    status.name
                );
                status.note = Some(
                    status
                        .note
                        .take()
                        .map_or(said.clone(), |note| format!("{said}; {note}")),
                );
            }
            Ok((status, false))
        }
        Err(error) => {
            // Half-started brokers only confuse the next run.
            broker.abandon(starting);
            Err(error)
        }
    }
}

/// The running broker `pid`, checked, its nodes that were down started again, answering.
fn use_running<L: Lifecycle + ?Sized>(broker: &L, pid: u32) -> Result<BrokerStatus, BrokerError> {
    let status = broker.status_of(pid);
    broker.check_running(&status)?;
    let status = start_down_nodes(broker, status)?;
    broker.wait_running(&status)?;
    Ok(status)
}

/// A running cluster with nodes down (killed by a fault, a chaos tool or a crash) gets them
/// back: each node down starts again as it was and is waited for until it answers its clients
/// (catching up with the others is the cluster's own business), and the status's note says
/// which.
fn start_down_nodes<L: Lifecycle + ?Sized>(
    broker: &L,
    status: BrokerStatus,
) -> Result<BrokerStatus, BrokerError> {
    let down: Vec<u32> = status
        .nodes
        .iter()
        .filter(|n| !n.up)
        .map(|n| n.id)
        .collect();
    if down.is_empty() {
        return Ok(status);
    }
    let mut said = Vec::new();
    for id in down {
        let pid = broker.start_again(id)?;
        said.push(format!(
            "node {id} of the {} was down: started again (pid {pid})",
            status.name
        ));
    }
    let pid = broker.running_pid().unwrap_or(status.pid);
    let mut status = broker.status_of(pid);
    said.extend(status.note.take());
    status.note = Some(said.join("; "));
    Ok(status)
}

/// Stops the process this folder started; its pid, or None when none ran.
pub fn down<L: Lifecycle + ?Sized>(broker: &L) -> Result<Option<u32>, BrokerError> {
    managed::down(
        &broker.dir(),
        || broker.running_pid(),
        |pid| broker.stop(pid),
        &broker.leftovers(),
    )
}

/// The running broker of this folder, or None; does not check that it answers.
pub fn status<L: Lifecycle + ?Sized>(broker: &L) -> Option<BrokerStatus> {
    broker.running_pid().map(|pid| broker.status_of(pid))
}

#[cfg(test)]
mod tests;
