//! Which node leads a stream: the `/jsz` page of every node that holds a replica of it names
//! its cluster leader by server name (a node that holds none does not list the stream).

use serde_json::Value;

use super::*;

impl ManagedNats {
    /// The node that leads `stream` now, as the first running node that holds it says.
    pub(super) fn leader_of(&self, stream: &str) -> Result<u32, BrokerError> {
        let size = self.size();
        let mut held = false;
        for id in 1..=size {
            let Some(jsz) = self.jsz(id) else { continue };
            let Some(detail) = stream_detail(&jsz, stream) else {
                continue;
            };
            held = true;
            if size == 1 {
                return Ok(1);
            }
            let leader = detail["cluster"]["leader"].as_str().unwrap_or_default();
            if let Some(node) =
                (1..=size).find(|&n| layout::server_name(n, size as usize) == leader)
            {
                return Ok(node);
            }
        }
        Err(BrokerError::NoLeader {
            object: format!("stream {stream}"),
            why: match held {
                true => "its replicas are electing one".into(),
                false => "no running node holds it".into(),
            },
        })
    }

    /// Node `id`'s `/jsz` with every account's streams, when it answers.
    fn jsz(&self, id: u32) -> Option<Value> {
        let port = super::monitor_port(&self.node(id))?;
        // A paused node takes the connection and never answers: the fault waits.
        ready::get_json(
            port,
            "/jsz?accounts=true&streams=true",
            Duration::from_secs(1),
        )
    }
}

/// The stream called `name` among a `/jsz` answer's account details.
fn stream_detail<'a>(jsz: &'a Value, name: &str) -> Option<&'a Value> {
    jsz["account_details"]
        .as_array()?
        .iter()
        .filter_map(|account| account["stream_detail"].as_array())
        .flatten()
        .find(|stream| stream["name"] == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stream_is_found_in_any_account() {
        let jsz = json!({"account_details": [
            {"name": "A", "stream_detail": [{"name": "other"}]},
            {"name": "$G", "stream_detail": [{"name": "s", "cluster": {"leader": "brokerbench-3"}}]},
        ]});
        assert_eq!(
            stream_detail(&jsz, "s").unwrap()["cluster"]["leader"],
            "brokerbench-3"
        );
        assert!(stream_detail(&jsz, "t").is_none());
        assert!(stream_detail(&json!({}), "s").is_none());
    }
}
