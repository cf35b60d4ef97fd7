//! Pulsar's admin REST API (`/admin/v2`), for what the binary protocol does not do:
//! partitioned topics, a run's namespace with its persistence policies, the bookies there
//! are, and deleting the run's topics.

use std::time::Duration;

use serde_json::Value;

use crate::config::Token;

/// How long one admin request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct Admin {
    base: String,
    token: Option<Token>,
    agent: ureq::Agent,
}

impl Admin {
    /// The API at `base` (`http://host:8080`).
    pub fn new(base: &str, token: Option<&Token>) -> Admin {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .proxy(None)
            .user_agent(concat!("brokerbench/", env!("CARGO_PKG_VERSION")))
            .build();
        Admin {
            base: base.to_string(),
            token: token.cloned(),
            agent: config.into(),
        }
    }

    /// `method path` with `body` as JSON; the status and the answer's text, or why there is
    /// none.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, String), String> {
        let url = format!("{}/admin/v2/{path}", self.base);
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Content-Type", "application/json");
        let request = match &self.token {
            Some(token) => request.header("Authorization", format!("Bearer {}", token.0)),
            None => request,
        };
        let text = body.map(Value::to_string).unwrap_or_default();
        let request = request.body(text).map_err(|e| e.to_string())?;
        let mut response = self.agent.run(request).map_err(|e| {
            let url = brokerbench_model::redact::redact_uri(&url);
            format!("{method} {url}: {e}")
        })?;
        let status = response.status().as_u16();
        let answer = response.body_mut().read_to_string().unwrap_or_default();
        Ok((status, answer))
    }

    /// `call`, Ok for a 2xx answer or a status in `also_fine`.
    fn expect(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        also_fine: &[u16],
    ) -> Result<String, String> {
        let (status, answer) = self.call(method, path, body)?;
        if (200..300).contains(&status) || also_fine.contains(&status) {
            return Ok(answer);
        }
        let reason = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|v| v.get("reason").and_then(Value::as_str).map(str::to_string))
            .unwrap_or(answer);
        Err(format!(
            "{method} /admin/v2/{path}: {status} {}",
            reason.trim()
        ))
    }

    /// Creates topic `path` (`persistent/tenant/ns/name`) with `partitions` partitions (fine
    /// when it exists: another shard of the run made it).
    pub fn create_partitioned(&self, path: &str, partitions: u32) -> Result<(), String> {
        let body = Value::from(partitions);
        self.expect("PUT", &format!("{path}/partitions"), Some(&body), &[409])
            .map(drop)
    }

    /// Deletes topic `path`, partitioned or not, and its subscriptions.
    pub fn delete_topic(&self, path: &str, partitioned: bool) -> Result<(), String> {
        let path = if partitioned {
            format!("{path}/partitions?force=true")
        } else {
            format!("{path}?force=true")
        };
        self.expect("DELETE", &path, None, &[404]).map(drop)
    }

    /// Creates namespace `tenant/ns` (fine when it exists).
    pub fn create_namespace(&self, namespace: &str) -> Result<(), String> {
        self.expect("PUT", &format!("namespaces/{namespace}"), None, &[409])
            .map(drop)
    }

    /// Creates tenant `tenant`, allowed on every cluster the broker knows, unless it exists
    /// (as OMB does for its `namespacePrefix`); whether it was created.
    pub fn ensure_tenant(&self, tenant: &str) -> Result<bool, String> {
        let (status, _) = self.call("GET", &format!("tenants/{tenant}"), None)?;
        if status != 404 {
            return Ok(false);
        }
        let clusters = self.expect("GET", "clusters", None, &[])?;
        let clusters: Value = serde_json::from_str(&clusters).map_err(|e| e.to_string())?;
        let body = serde_json::json!({ "adminRoles": [], "allowedClusters": clusters });
        self.expect("PUT", &format!("tenants/{tenant}"), Some(&body), &[409])?;
        Ok(true)
    }

    /// Deletes namespace `tenant/ns` (its topics deleted first).
    pub fn delete_namespace(&self, namespace: &str) -> Result<(), String> {
        self.expect("DELETE", &format!("namespaces/{namespace}"), None, &[404])
            .map(drop)
    }

    /// Sets a namespace's persistence policies.
    pub fn set_persistence(
        &self,
        namespace: &str,
        p: &crate::config::Persistence,
    ) -> Result<(), String> {
        let body = serde_json::json!({
            "bookkeeperEnsemble": p.ensemble_size,
            "bookkeeperWriteQuorum": p.write_quorum,
            "bookkeeperAckQuorum": p.ack_quorum,
            // As OMB sets it: a subscription's position stored at most once a second.
            "managedLedgerMaxMarkDeleteRate": 1.0,
        });
        self.expect(
            "POST",
            &format!("namespaces/{namespace}/persistence"),
            Some(&body),
            &[],
        )?;
        let dedup = Value::from(p.deduplication);
        self.expect(
            "POST",
            &format!("namespaces/{namespace}/deduplication"),
            Some(&dedup),
            &[],
        )
        .map(drop)
    }

    /// The statistics of topic `path` (`persistent/tenant/ns/name`, or a partition's).
    pub fn topic_stats(&self, path: &str) -> Result<Value, String> {
        let answer = self.expect("GET", &format!("{path}/stats"), None, &[])?;
        serde_json::from_str(&answer).map_err(|e| e.to_string())
    }

    /// Sets a namespace's backlog quota: `size` bytes per subscription, then `policy`.
    pub fn set_backlog_quota(
        &self,
        namespace: &str,
        size: u64,
        policy: &str,
    ) -> Result<(), String> {
        let body = serde_json::json!({ "limitSize": size, "limitTime": -1, "policy": policy });
        let path =
            format!("namespaces/{namespace}/backlogQuota?backlogQuotaType=destination_storage");
        self.expect("POST", &path, Some(&body), &[]).map(drop)
    }

    /// How many bookies the cluster has.
    pub fn bookies(&self) -> Result<usize, String> {
        let all = self.expect("GET", "bookies/all", None, &[])?;
        let value: Value = serde_json::from_str(&all).map_err(|e| e.to_string())?;
        Ok(value
            .get("bookies")
            .and_then(Value::as_array)
            .map_or(0, Vec::len))
    }
}
