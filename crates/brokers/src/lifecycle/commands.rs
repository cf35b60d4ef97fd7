//! The `ManagedBroker` methods every broker with a [`Lifecycle`](super::Lifecycle) of its own
//! writes alike, written once as a macro for its `impl ManagedBroker` block.

/// `restart_node` (the lifecycle's `start_again`), `down`, and `status` once the broker's port
/// setting (its `self.port()`) is checked, inside an `impl ManagedBroker for …` block of a
/// broker that implements [`Lifecycle`](crate::lifecycle::Lifecycle).
///
/// `lifecycle_commands!(installs RELEASE)` writes `install` and `up` too, for a broker that
/// runs the pinned [`Distribution`](crate::distribution::Distribution) `RELEASE` in its
/// folder (`self.daemon.dir`): `up` installs it first when it is not there, once the port
/// setting is checked.
#[macro_export]
macro_rules! lifecycle_commands {
    (installs $release:expr) => {
        fn install(&self) -> Result<String, $crate::BrokerError> {
            $release.install_said(&self.daemon.dir)
        }

        fn up(&self) -> Result<($crate::BrokerStatus, bool), $crate::BrokerError> {
            self.port()?;
            $release.install_first(&self.daemon.dir)?;
            $crate::lifecycle::up(self)
        }

        $crate::lifecycle_commands!();
    };
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
