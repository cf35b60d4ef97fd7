//! A stream of several replicas asked for before the meta leader can place it: a cluster that
//! has just formed, or a node just back, is refused with "no suitable peers for placement"
//! until the leader has heard the node's first statistics (it counts a peer without them as
//! offline). Such a refusal is waited out, for a bounded time, and named if it lasts; so is
//! the time until the new stream's own group has elected its leader.

use std::time::{Duration, Instant};

use brokerbench_driver::DriverError;

/// What the server answers while it cannot place a stream's replicas.
const NO_PEERS: &str = "no suitable peers for placement";

/// How long a refused placement is retried.
pub(crate) const PLACEMENT_WAIT: Duration = Duration::from_secs(15);

/// How long to pause between tries.
const PAUSE: Duration = Duration::from_millis(200);

/// `create` until it is not refused for want of peers, for at most `wait`; the last refusal
/// says how long it was waited out and what to check.
pub(crate) fn placed<T>(
    wait: Duration,
    replicas: u32,
    mut create: impl FnMut() -> Result<T, DriverError>,
) -> Result<T, DriverError> {
    let deadline = Instant::now() + wait;
    loop {
        match create() {
            Err(DriverError::Other(text)) if text.contains(NO_PEERS) => {
                if Instant::now() >= deadline {
                    return Err(DriverError::Other(format!(
                        "{text} (still after {wait:?}: are {replicas} servers of the cluster up, routed and running JetStream?)"
                    )));
                }
                std::thread::sleep(PAUSE);
            }
            answer => return answer,
        }
    }
}

/// Asks `info` (the stream's STREAM.INFO) until the stream's own group has elected a leader,
/// for at most `wait`: before that every publish to it is answered "no responders".
pub(crate) fn led(
    wait: Duration,
    mut info: impl FnMut() -> Result<serde_json::Value, DriverError>,
) -> Result<(), DriverError> {
    let deadline = Instant::now() + wait;
    loop {
        let answer = info()?;
        if answer["cluster"]["leader"]
            .as_str()
            .is_some_and(|l| !l.is_empty())
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(DriverError::Other(format!(
                "nats: the stream has no leader after {wait:?}: are its replicas' servers up and routed?"
            )));
        }
        std::thread::sleep(PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_ready_once_its_group_has_a_leader() {
        let mut asked = 0;
        let ready = led(Duration::from_secs(5), || {
            asked += 1;
            let leader = if asked < 3 { "" } else { "brokerbench-2" };
            Ok(serde_json::json!({"cluster": {"name": "c", "leader": leader}}))
        });
        assert!(ready.is_ok());
        assert_eq!(asked, 3);
        let never = led(Duration::from_millis(300), || Ok(serde_json::json!({})));
        assert!(never
            .unwrap_err()
            .to_string()
            .contains("no leader after 300ms"));
    }

    fn refused() -> Result<u32, DriverError> {
        Err(DriverError::Other(
            "nats $JS.API.STREAM.CREATE.s: no suitable peers for placement, peer offline".into(),
        ))
    }

    #[test]
    fn a_refused_placement_is_tried_again_until_the_peers_are_there() {
        let mut tries = 0;
        let answer = placed(Duration::from_secs(5), 3, || {
            tries += 1;
            if tries < 3 {
                refused()
            } else {
                Ok(tries)
            }
        });
        assert_eq!(answer.unwrap(), 3);
    }

    #[test]
    fn a_placement_refused_past_the_wait_says_how_long_and_what_to_check() {
        let started = Instant::now();
        let error = placed(Duration::from_millis(300), 3, refused).unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let text = error.to_string();
        assert!(text.contains("peer offline (still after 300ms"), "{text}");
        assert!(text.contains("are 3 servers of the cluster up"), "{text}");
    }

    #[test]
    fn other_errors_are_not_tried_again() {
        let mut tries = 0;
        let error = placed(Duration::from_secs(5), 3, || -> Result<(), DriverError> {
            tries += 1;
            Err(DriverError::Other(
                "nats: stream name already in use".into(),
            ))
        });
        assert!(error.is_err());
        assert_eq!(tries, 1);
    }
}
