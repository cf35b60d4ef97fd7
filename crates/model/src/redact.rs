//! Removes credentials from anything that is written or printed: config keys that name a
//! secret, and passwords inside URIs.

const SECRET_WORDS: &[&str] = &[
    "password",
    "secret",
    "token",
    "jaas",
    "credential",
    "api.key",
    "apikey",
    // librdkafka's inline private key, `ssl.key.pem`.
    "key.pem",
];

/// Whether a config key (e.g. `sasl.password`) holds a credential.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| key.contains(w))
}

/// Replaces the password in `scheme://user:password@host` with `***`, and a user given
/// without a password (`scheme://TOKEN@host`, how NATS and many HTTP endpoints take a token)
/// with `***` as a whole; in every URI of the text (a list of them, `[a://u:p@h, b://…]`).
pub fn redact_uri(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let (head, rest) = text.split_at(scheme_end + 3);
    // The authority ends at the path, or before the next URI; the host starts after its last
    // '@' (a raw '@' may be in the password).
    let authority_end = [rest.find('/'), rest.find("://")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let shown = match userinfo.find(':') {
                Some(colon) => format!("{}:***", &userinfo[..colon]),
                None => "***".to_string(),
            };
            format!("{head}{shown}@{}", redact_uri(&rest[at + 1..]))
        }
        None => format!("{head}{}", redact_uri(rest)),
    }
}

/// Redacts secret-named keys and URI passwords anywhere in a JSON tree.
pub fn redact_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                redact_setting(key, v);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::String(s) => *s = redact_uri(s),
        _ => {}
    }
}

/// Redacts the value of one setting: all of it when its key or path (`sasl.password`,
/// `producer_config.sasl.password`) names a secret, else the secrets inside it.
pub fn redact_setting(key: &str, value: &mut serde_json::Value) {
    if is_secret_key(key) && !value.is_null() {
        *value = serde_json::Value::String("***".into());
    } else {
        redact_json(value);
    }
}

/// Redacts a `key=value` override as given on the command line.
pub fn redact_assignment(assignment: &str) -> String {
    match assignment.split_once('=') {
        // A URL given as its own argument may hold '=' in its password or query.
        Some((key, _)) if key.contains("://") => redact_uri(assignment),
        // A secret-named key, or a whole mapping that holds one (`block={password: …}`).
        Some((key, value)) if is_secret_key(key) || is_secret_key(value) => format!("{key}=***"),
        Some((key, value)) => format!("{key}={}", redact_uri(value)),
        // A flag's value given as its own argument, e.g. `--broker-metrics http://u:p@h/`.
        None => redact_uri(assignment),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_and_sasl_settings_that_hold_secrets_are_named_secret() {
        for key in [
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "sasl.jaas.config",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in ["sasl.username", "ssl.ca.location", "security.protocol"] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn assignments_and_bare_urls_lose_their_secrets() {
        for (given, shown) in [
            (
                "--broker-metrics=https://u:pw@h/m",
                "--broker-metrics=https://u:***@h/m",
            ),
            ("https://u:abc==@h/metrics", "https://u:***@h/metrics"),
            ("https://u:p@h/metrics?x=1", "https://u:***@h/metrics?x=1"),
            ("broker_metrics.password=pw", "broker_metrics.password=***"),
            (
                "broker_metrics={username: u, password: pw}",
                "broker_metrics=***",
            ),
            ("rate=1000", "rate=1000"),
            ("servers=nats://s3cr3t@h:4222", "servers=nats://***@h:4222"),
        ] {
            assert_eq!(redact_assignment(given), shown);
        }
    }

    #[test]
    fn a_user_without_a_password_is_a_token_and_is_replaced() {
        for (given, shown) in [
            ("https://TOKEN@host/metrics", "https://***@host/metrics"),
            ("nats://s3cr3t@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
            ("http://a@b@host/", "http://***@host/"),
            ("https://@host/", "https://***@host/"),
        ] {
            assert_eq!(redact_uri(given), shown);
        }
        let mut v = serde_json::json!({"broker_metrics": {"url": "https://TOKEN@h/m"}});
        redact_json(&mut v);
        assert!(!v.to_string().contains("TOKEN"), "{v}");
    }

    #[test]
    fn secrets_are_replaced() {
        let mut v = serde_json::json!({
            "producer_config": {"sasl.password": "hunter2", "acks": "1", "ssl.key.password": "x"},
            "uri": "amqp://guest:guest@127.0.0.1:5672/%2f"
        });
        redact_json(&mut v);
        let text = v.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("guest@"),
            "{text}"
        );
        assert!(text.contains("\"acks\":\"1\""));
        assert_eq!(
            redact_assignment("producer_config.sasl.password=pw"),
            "producer_config.sasl.password=***"
        );
        assert_eq!(redact_uri("http://host:1"), "http://host:1");
        assert_eq!(redact_uri("http://h/a@b"), "http://h/a@b");
        assert_eq!(
            redact_uri("amqp://u:p@ss@h:5672/%2f"),
            "amqp://u:***@h:5672/%2f"
        );
    }

    #[test]
    fn every_uri_of_a_list_is_redacted() {
        for (given, shown) in [
            (
                "failover_uris=[amqp://u:p1@a/%2f, amqp://u:p2@b/%2f]",
                "failover_uris=[amqp://u:***@a/%2f, amqp://u:***@b/%2f]",
            ),
            (
                "servers=nats://tok@h:4222,nats://u:p2@h2:4222",
                "servers=nats://***@h:4222,nats://u:***@h2:4222",
            ),
            (
                "x=[http://h/a, amqp://u:p@b]",
                "x=[http://h/a, amqp://u:***@b]",
            ),
        ] {
            assert_eq!(redact_assignment(given), shown);
        }
    }
}
