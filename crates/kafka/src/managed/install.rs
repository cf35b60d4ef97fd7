//! Installing the broker's jars (and the JMX exporter agent) with Maven.

use super::*;

impl Kafka {
    /// Fetches the broker's jars with Maven (from ~/.m2, else Maven Central) into
    /// [`Kafka::lib_dir`]. Does nothing when they are there already.
    pub fn install(&self) -> Result<(), BrokerError> {
        if self.is_installed() {
            return Ok(());
        }
        let version_dir = self.version_dir();
        fs::create_dir_all(&version_dir).map_err(BrokerError::io("creating", &version_dir))?;
        let pom = version_dir.join("pom.xml");
        process::write_atomically(&pom, POM.as_bytes())?;

        // Fill a side folder and rename it: an interrupted install never looks complete.
        let partial = version_dir.join("lib.partial");
        let lib = self.lib_dir();
        for stale in [&partial, &lib] {
            if stale.exists() {
                fs::remove_dir_all(stale).map_err(BrokerError::io("removing", stale))?;
            }
        }
        let mut maven = Command::new("mvn");
        maven
            .args(["-q", "-B", "-Dstyle.color=never", "-f"])
            .arg(&pom)
            .arg("dependency:copy-dependencies")
            .arg(concat_os("-DoutputDirectory=", &partial))
            .current_dir(&version_dir)
            .stdin(Stdio::null());
        let output = maven
            .output()
            .map_err(|source| BrokerError::MavenNotFound {
                program: "mvn".to_string(),
                source,
            })?;
        if !output.status.success() {
            let mut printed = String::from_utf8_lossy(&output.stdout).into_owned();
            printed.push_str(&String::from_utf8_lossy(&output.stderr));
            return Err(BrokerError::MavenFailed {
                broker: NAME,
                what: format!("the Kafka {VERSION} jars"),
                status: output.status,
                output: process::last_lines(&strip_ansi(&printed), LOG_TAIL_LINES),
            });
        }
        let agent_dir = version_dir.join("agent");
        fs::create_dir_all(&agent_dir).map_err(BrokerError::io("creating", &agent_dir))?;
        let agent = partial.join(AGENT_JAR);
        fs::rename(&agent, self.agent_jar()).map_err(BrokerError::io("moving", &agent))?;
        fs::rename(&partial, &lib).map_err(BrokerError::io("renaming to", &lib))?;
        if !self.is_installed() {
            return Err(BrokerError::NotInstalled {
                broker: NAME,
                dir: lib,
            });
        }
        Ok(())
    }
}

pub(super) fn concat_os(prefix: &str, path: &Path) -> OsString {
    let mut argument = OsString::from(prefix);
    argument.push(path);
    argument
}

/// Removes ANSI colour sequences: Maven 3.8 emits resets even with `-B -Dstyle.color=never`.
pub(super) fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut characters = text.chars();
    while let Some(character) = characters.next() {
        if character == '\u{1b}' {
            // CSI sequences end with a letter: `ESC [ 0 m`.
            for sequence in characters.by_ref() {
                if sequence.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(character);
        }
    }
    plain
}
