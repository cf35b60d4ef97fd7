//! The registry: every broker family this build knows, one line each. The first is the
//! default driver. Adding a broker is adding its crate's `FAMILY` here (see
//! docs/src/architecture.md, "Adding a broker").

use brokerbench_family::Registry;

/// Every registered broker family.
pub static REGISTRY: Registry = Registry(&[
    &brokerbench_kafka::FAMILY,
    &brokerbench_amqp::FAMILY,
    &brokerbench_nats::FAMILY,
    &brokerbench_artemis::FAMILY,
    &brokerbench_pulsar::FAMILY,
    &brokerbench_redis::FAMILY,
    &brokerbench_mqtt::FAMILY,
    &brokerbench_mock::FAMILY,
]);
