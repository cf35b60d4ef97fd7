//! The mock's managed broker: there is none to install, start or stop.

use brokerbench_brokers::{BrokerError, BrokerStatus, ManagedBroker};

/// Where a mock run's messages go, as its manifest names the broker.
pub const ADDRESS: &str = "in-memory (brokerbench's own process)";

/// What `broker install|up|down|status mock` finds: nothing to run.
pub struct NoBroker;

const WHY: &str = "its queues are inside brokerbench's own process, so `brokerbench run --set driver=mock` needs none";

impl ManagedBroker for NoBroker {
    fn install(&self) -> Result<String, BrokerError> {
        Ok("mock: nothing to install (its queues are inside brokerbench's own process)".into())
    }
    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        Err(BrokerError::NoBroker {
            broker: "mock",
            why: WHY,
        })
    }
    fn down(&self) -> Result<Option<u32>, BrokerError> {
        Ok(None)
    }
    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        Ok(None)
    }
    fn client_address(&self, _status: &BrokerStatus) -> String {
        ADDRESS.to_string()
    }
    fn metrics_url(&self) -> Option<String> {
        None
    }
}
