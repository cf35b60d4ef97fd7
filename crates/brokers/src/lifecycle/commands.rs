//! The `ManagedBroker` methods every broker with a [`Lifecycle`](super::Lifecycle) of its own
//! writes alike, written once as a macro for its `impl ManagedBroker` block.

/// `restart_node` (the lifecycle's `start_again`), `down`, and `status` once the broker's port
/// setting (its `self.port()`) is checked, inside an `impl ManagedBroker for …` block of a
/// broker that implements [`Lifecycle`](crate::lifecycle::Lifecycle).
#[macro_export]
macro_rules! lifecycle_commands {
    () => {
        fn restart_node(&self, id: u32) -> Result<u32, $crate::BrokerError> {
            $crate::lifecycle::Lifecycle::start_again(self, id)
        }

        fn down(&self) -> Result<Option<u32>, $crate::BrokerError> {
            $crate::lifecycle::down(self)
        }

        fn status(&self) -> Result<Option<$crate::BrokerStatus>, $crate::BrokerError> {
            self.port()?;
            Ok($crate::lifecycle::status(self))
        }
    };
}
