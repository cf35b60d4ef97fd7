//! What an MQTT client connects again to after a lost connection (the broker restarted, or was
//! killed and started again): the broker, its session, and for a consumer its subscription,
//! made again on the new connection.

use brokerbench_driver::REDIAL_TIMEOUT;

use crate::conn::{Conn, Session};
use crate::url::MqttUrl;

/// What a consumer subscribes to: its filters, at a QoS.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub filters: Vec<String>,
    pub qos: u8,
}

/// The broker, the session, and the subscription if any.
pub struct Target {
    pub url: MqttUrl,
    pub session: Session,
    pub subscription: Option<Subscription>,
}

/// A producer's or consumer's way back to the broker under the driver file's backoff.
pub type Reconnector = brokerbench_driver::Reconnector<Conn, Target>;

/// A new connection to the target, with the subscription made again (all its filters
/// granted), or None.
pub fn redial(target: &Target) -> Option<Conn> {
    let mut conn = Conn::connect(&target.url, &target.session, REDIAL_TIMEOUT).ok()?;
    if let Some(s) = &target.subscription {
        let granted = conn.subscribe(&s.filters, s.qos, REDIAL_TIMEOUT).ok()?;
        if granted.iter().any(|&g| g >= 0x80) {
            return None;
        }
    }
    Some(conn)
}
