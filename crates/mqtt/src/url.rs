//! A broker's URL: `mqtt://[user:password@]host:port`, `mqtts://` for TLS (and Paho's `tcp://`
//! and `ssl://`, as OpenMessaging Benchmark files write them). Debug, Display and Serialize
//! hide the password.

use brokerbench_driver::url::{BrokerUrl, NoUser, Scheme};

/// An MQTT broker's URL.
pub type MqttUrl = BrokerUrl<Mqtt>;

/// MQTT's kind of URL: what follows the address means nothing to a client.
pub struct Mqtt;

impl Scheme for Mqtt {
    const TYPE: &'static str = "MqttUrl";
    const PLAIN: &'static [&'static str] = &["mqtt", "tcp"];
    const SECURE: &'static [&'static str] = &["mqtts", "ssl", "tls"];
    const PORTS: (u16, u16) = (1883, 8883);
    const WRITE: &'static str = "write mqtt://host:port (mqtts://host:port for TLS)";
    const NO_HOST: &'static str = "the URL names no host; write mqtt://host:port";
    const NO_USER: NoUser =
        NoUser::Refused("a password needs its user name: write mqtt://user:password@host:port");
    type Path = ();

    fn bad_port(_port: &str) -> String {
        "what follows the host's last `:` is not a port number; write mqtt://[user:password@]host:port".into()
    }
    fn split(rest: &str) -> Result<(&str, ()), String> {
        Ok((rest.split(['/', '?', '#']).next().unwrap_or(rest), ()))
    }
    fn path_text(_path: &()) -> String {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_hide_their_password() {
        let u = MqttUrl::parse("mqtt://bench:s3cret@127.0.0.1:1884").unwrap();
        assert_eq!(
            (u.address(), u.user.as_deref(), u.password()),
            ("127.0.0.1:1884".into(), Some("bench"), Some("s3cret"))
        );
        // The generic redaction (Debug, Display, Serialize) is driver::url's; the family's
        // scheme shows the user and hides the password.
        assert_eq!(u.to_string(), "mqtt://bench:***@127.0.0.1:1884");
        assert_eq!(u.with_secret(), "mqtt://bench:s3cret@127.0.0.1:1884");
        let tls = MqttUrl::parse("ssl://h").unwrap();
        assert_eq!((tls.port, tls.tls.is_some()), (8883, true));
        assert_eq!(MqttUrl::parse("tcp://localhost:1883").unwrap().port, 1883);
        assert_eq!(MqttUrl::parse("localhost").unwrap().port, 1883);
        assert!(MqttUrl::parse("mqtt://:pw@h")
            .unwrap_err()
            .contains("user name"));
        assert!(MqttUrl::parse("http://h:1")
            .unwrap_err()
            .contains("mqtt://host:port"));
    }
}
