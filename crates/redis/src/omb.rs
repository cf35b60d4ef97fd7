//! OpenMessaging Benchmark Redis driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver`): `redisHost` and `redisPort`
//! are the server, `redisUser` and `redisPass` its login; the Jedis pool's sizes mean nothing
//! here (every producer and consumer has a connection of its own).

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::check_driver_keys;
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

/// OMB's Redis driver class.
pub const OMB_DRIVER_CLASS: &str = "io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver";

/// Every field of an OMB Redis driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &[
    "name",
    "driverClass",
    "redisHost",
    "redisPort",
    "redisUser",
    "redisPass",
    "jedisPoolMaxTotal",
    "jedisPoolMaxIdle",
];

/// Translates an OMB Redis driver file into brokerbench's Redis driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let text = |key: &str| -> Result<Option<String>, SpecError> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(SpecError::field(file, key, "must be a string")),
        }
    };
    let host = text("redisHost")?.unwrap_or_else(|| "127.0.0.1".into());
    let port = match text("redisPort")? {
        None => 6379,
        Some(p) => p.parse::<u16>().map_err(|_| {
            SpecError::field(
                file,
                "redisPort",
                format!("'{p}' is not a port number (e.g. 6379)"),
            )
        })?,
    };
    let url = crate::config::RedisUrl::parse(&format!("redis://{host}:{port}"))
        .map_err(|e| SpecError::field(file, "redisHost", e))?
        .with_login(text("redisUser")?, text("redisPass")?);
    if url.user.is_some() && url.password().is_none() {
        return Err(SpecError::field(
            file,
            "redisUser",
            "a user needs its password: add redisPass (OMB's driver sends neither without it)",
        ));
    }
    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark Redis driver file: one stream per topic, XADD per message, a consumer group per subscription — with each entry acknowledged (XACK), which OMB's driver never does"
    )];
    notes.push(format!(
        "redisHost/redisPort: the run uses the server at {url} (the managed Redis listens on 6379 unless BROKERBENCH_REDIS_PORT moves it: `brokerbench broker up redis` starts it)"
    ));
    if value.get("jedisPoolMaxTotal").is_some() || value.get("jedisPoolMaxIdle").is_some() {
        notes.push("jedisPoolMaxTotal/jedisPoolMaxIdle: ignored (Jedis's pool sizes; brokerbench gives every producer and consumer its own connection)".into());
    }
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("redis"));
    out.insert("redis_url".into(), Value::from(url_text(&url, &host, port)));
    Ok(OmbDriver {
        map: Value::Object(out),
        notes,
    })
}

/// The URL with its password, as the driver mapping carries it (never shown: the driver's
/// URL type hides it).
fn url_text(url: &crate::config::RedisUrl, host: &str, port: u16) -> String {
    let login = match (&url.user, url.password()) {
        (Some(user), Some(password)) => format!("{user}:{password}@"),
        (None, Some(password)) => format!(":{password}@"),
        _ => String::new(),
    };
    format!("redis://{login}{host}:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("r.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    #[test]
    fn an_omb_redis_driver_file_names_the_server() {
        let d = omb("name: Redis\ndriverClass: io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver\n\n# Redis client-specific configuration\nredisPort: 6379\nredisHost: 127.0.0.1\njedisPoolMaxTotal: 8\njedisPoolMaxIdle: 8\n").unwrap();
        assert_eq!(d.map["driver"], "redis");
        assert_eq!(d.map["redis_url"], "redis://127.0.0.1:6379");
        assert!(
            d.notes.iter().any(|n| n.contains("jedisPool")),
            "{:?}",
            d.notes
        );
        let d = omb("driverClass: io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver\nredisHost: h\nredisPort: 6380\nredisUser: bench\nredisPass: hunter2\n").unwrap();
        assert_eq!(d.map["redis_url"], "redis://bench:hunter2@h:6380");
        assert!(
            !format!("{:?}", d.notes).contains("hunter2"),
            "{:?}",
            d.notes
        );
        let e = omb("driverClass: io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver\nredisPort: six\n").unwrap_err().to_string();
        assert!(e.contains("`redisPort`"), "{e}");
        let e = omb("driverClass: io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver\nredisHots: h\n").unwrap_err().to_string();
        assert!(e.contains("did you mean `redisHost`"), "{e}");
    }
}
