//! The KRaft data directory, formatted once with a cluster id kept for the home.

use super::*;

impl Kafka {
    /// Formats `data/` for KRaft the first time only; later starts reuse it.
    pub(super) fn format_storage_once(&self) -> Result<(), BrokerError> {
        let data = self.data_dir();
        if data.join("meta.properties").is_file() {
            return Ok(());
        }
        let cluster_id = self.cluster_id()?;
        let mut format = self.java_command("256m");
        format
            .arg("kafka.tools.StorageTool")
            .arg("format")
            .arg("--cluster-id")
            .arg(&cluster_id)
            .arg("--config")
            .arg(self.properties_file())
            // A data dir formatted before with the same cluster id (meta.properties lost
            // while the rest remained) is fine to reuse.
            .arg("--ignore-formatted");
        self.redirect_to_log(&mut format)?;
        let status = format
            .stdin(Stdio::null())
            .status()
            .map_err(|source| self.java_not_found(source))?;
        if !status.success() {
            return Err(BrokerError::CommandFailed {
                what: format!("formatting the Kafka data directory {}", data.display()),
                status,
                log_file: self.log_file(),
                log_tail: process::log_tail(&self.log_file(), LOG_TAIL_LINES),
            });
        }
        Ok(())
    }

    /// The cluster id of this home, generated on first use and kept in `cluster.id`.
    pub(super) fn cluster_id(&self) -> Result<String, BrokerError> {
        let path = self.dir().join("cluster.id");
        if let Ok(id) = fs::read_to_string(&path) {
            let id = id.trim();
            if is_cluster_id(id) {
                return Ok(id.to_string());
            }
        }
        let id = random_cluster_id().map_err(BrokerError::io("reading", Path::new(RANDOM)))?;
        process::write_atomically(&path, format!("{id}\n").as_bytes())?;
        Ok(id)
    }
}

pub(super) const RANDOM: &str = "/dev/urandom";

/// A random cluster id in Kafka's format: a version-4 UUID, base64url without padding
/// (22 characters), as `kafka-storage.sh random-uuid` prints, without starting a JVM.
pub(super) fn random_cluster_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut random = fs::File::open(RANDOM)?;
    loop {
        let mut bytes = [0u8; 16];
        random.read_exact(&mut bytes)?;
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let id = base64_url(&bytes);
        // Kafka never hands out ids starting with '-': they read as a command-line flag.
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

pub(super) fn is_cluster_id(id: &str) -> bool {
    id.len() == 22
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// Base64 with the URL-safe alphabet and no padding (RFC 4648 §5).
pub(super) fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk.iter().enumerate().fold(0u32, |group, (i, &byte)| {
            group | u32::from(byte) << (16 - 8 * i)
        });
        for i in 0..=chunk.len() {
            text.push(char::from(ALPHABET[(group >> (18 - 6 * i)) as usize & 63]));
        }
    }
    text
}
