//! What the summary must know about the driver, asked once the tasks are done: its name, what
//! its broker may drop, whether it confirms, and what its client did on its own.

/// What the summary must know about the driver.
pub(super) struct DriverPolicy {
    pub(super) name: &'static str,
    /// Why the broker may discard messages by design, if it may.
    pub(super) drops: Option<String>,
    /// How many messages the broker counted as discarded by its limits, and which.
    pub(super) dropped: Option<(u64, String)>,
    /// Whether every producer had its messages confirmed.
    pub(super) confirms: bool,
    /// What the client library did on its own (retries, rebalances), when the driver says.
    pub(super) events: Option<brokerbench_driver::ClientEvents>,
    /// The settings to check per error kind (see `Driver::failure_settings`).
    pub(super) failure_settings: &'static [(&'static str, &'static str)],
}
