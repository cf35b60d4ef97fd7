//! What the driver asks the server about itself: its version and mode (INFO), and its
//! persistence (CONFIG GET appendonly, appendfsync), which a driver file may set for the run.

use crate::config::Fsync;
use crate::conn::Conn;
use crate::resp::Value;
use crate::ADMIN_TIMEOUT;

/// The server, as INFO and CONFIG GET describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub version: String,
    /// `standalone`, `cluster` or `sentinel`.
    pub mode: String,
    /// Its persistence; None where CONFIG is not allowed (a managed service's restriction).
    pub persistence: Option<Persistence>,
}

/// `appendonly` and `appendfsync` as the server has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persistence {
    pub appendonly: String,
    pub appendfsync: String,
}

impl Server {
    /// Asks the server on `conn`.
    pub fn ask(conn: &mut Conn) -> Result<Server, String> {
        let info = conn.call(&[b"INFO", b"server"], ADMIN_TIMEOUT)?;
        let text = info.text().unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        Ok(Server {
            version: field("redis_version")
                .ok_or("INFO server names no redis_version: is this a Redis server?")?,
            mode: field("redis_mode").unwrap_or_else(|| "standalone".into()),
            persistence: persistence(conn).ok(),
        })
    }

    /// Streams need Redis 5; the driver speaks to one server, not a cluster's slots.
    pub fn check_streams(&self) -> Result<(), String> {
        let major: u32 = self
            .version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        if major < 5 {
            return Err(format!(
                "Redis {} has no streams (they came in 5.0): the redis driver needs Redis 5 or later",
                self.version
            ));
        }
        if self.mode == "cluster" {
            return Err("this Redis runs in cluster mode: the redis driver talks to one server and does not follow MOVED redirections; name a standalone server (or a primary) in redis_url".into());
        }
        Ok(())
    }

    /// `7.0.15 (appendonly yes, appendfsync everysec)`, for the manifest.
    pub fn describe(&self) -> String {
        match &self.persistence {
            Some(p) => format!(
                "{} (appendonly {}, appendfsync {})",
                self.version, p.appendonly, p.appendfsync
            ),
            None => format!("{} (persistence unknown: CONFIG GET refused)", self.version),
        }
    }
}

/// The server's `appendonly` and `appendfsync`.
fn persistence(conn: &mut Conn) -> Result<Persistence, String> {
    let get = |conn: &mut Conn, name: &str| -> Result<String, String> {
        let answer = conn.call(&[b"CONFIG", b"GET", name.as_bytes()], ADMIN_TIMEOUT)?;
        answer
            .field(name)
            .and_then(Value::text)
            .ok_or_else(|| format!("CONFIG GET {name} answered nothing"))
    };
    Ok(Persistence {
        appendonly: get(conn, "appendonly")?,
        appendfsync: get(conn, "appendfsync")?,
    })
}

/// What the server has now, to be put back after [`set_persistence`].
pub fn current_persistence(conn: &mut Conn) -> Result<Persistence, String> {
    persistence(conn)
}

/// Turns the append-only file on with `fsync` for the run.
pub fn set_persistence(conn: &mut Conn, fsync: Fsync) -> Result<(), String> {
    set(conn, "appendfsync", fsync.as_str())?;
    set(conn, "appendonly", "yes")
}

/// Puts back the persistence [`set_persistence`] found.
pub fn restore_persistence(conn: &mut Conn, before: &Persistence) -> Result<(), String> {
    set(conn, "appendfsync", &before.appendfsync)?;
    set(conn, "appendonly", &before.appendonly)
}

fn set(conn: &mut Conn, name: &str, value: &str) -> Result<(), String> {
    conn.call(
        &[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()],
        ADMIN_TIMEOUT,
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_servers_and_clusters_are_refused() {
        let server = |version: &str, mode: &str| Server {
            version: version.into(),
            mode: mode.into(),
            persistence: None,
        };
        assert!(server("7.0.15", "standalone").check_streams().is_ok());
        assert!(server("4.0.9", "standalone")
            .check_streams()
            .unwrap_err()
            .contains("5.0"));
        assert!(server("7.2.4", "cluster")
            .check_streams()
            .unwrap_err()
            .contains("cluster"));
        assert!(server("7.0.15", "standalone")
            .describe()
            .contains("unknown"));
    }
}
