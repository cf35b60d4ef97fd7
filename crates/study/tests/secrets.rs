//! Where a study's credentials come from: recorded by name and path, never by value; what a
//! resumed study is missing.

use std::path::{Path, PathBuf};

use brokerbench_study::secrets::{redacted_definition, redacted_value, SecretSources};
use brokerbench_study::Study;

/// A fresh folder of this test's own under the system's temporary folder.
fn folder(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("brokerbench-secrets-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn study(dir: &Path, text: &str) -> Study {
    let path = dir.join("study.yaml");
    std::fs::write(&path, text).unwrap();
    Study::load(&path).unwrap()
}

#[test]
fn the_definition_keeps_every_key_but_no_credential() {
    let dir = folder("definition");
    let s = study(
        &dir,
        "name: t\ndriver: {driver: nats, servers: \"nats://u:pw1@h:1\", broker_metrics: {url: \"https://t0k@h/m\"}}\nset: {producer_config.sasl.password: pw2, rate: 10}\n",
    );
    let mut definition = s.definition.clone();
    definition["--set"] = serde_json::json!(["broker_metrics.password=pw3", "rate=5"]);
    let shown = redacted_definition(&definition).to_string();
    for secret in ["pw1", "t0k", "pw2", "pw3"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    for kept in [
        "nats://u:***@h:1",
        "https://***@h/m",
        "\"producer_config.sasl.password\":\"***\"",
        "broker_metrics.password=***",
        "rate=5",
        "\"rate\":10",
    ] {
        assert!(shown.contains(kept), "{kept} not in {shown}");
    }
    let value = brokerbench_model::yaml::from_str("pw4").unwrap();
    assert_eq!(redacted_value("sasl.password", &value), "***");
    assert_eq!(redacted_value("acks", &value), "pw4");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sources_name_the_study_file_driver_files_and_variables_never_values() {
    let dir = folder("sources");
    std::fs::write(
        dir.join("secret.yaml"),
        "driver: nats\nservers: nats://u:pw5@h:1\n",
    )
    .unwrap();
    std::fs::write(dir.join("plain.yaml"), "driver: nats\n").unwrap();
    let s = study(
        &dir,
        "name: t\naxes: {driver: [secret.yaml, plain.yaml]}\nset: {rate: 10}\n",
    );
    let set = |name: &str| name == "B_PASSWORD";
    let sources = SecretSources::of(&s, &["A_PASSWORD", "B_PASSWORD"], set);
    assert_eq!(sources.study_file, None, "the study file holds none");
    assert_eq!(
        sources.driver_files,
        [dir.join("secret.yaml").display().to_string()]
    );
    assert_eq!(sources.environment, ["B_PASSWORD"]);
    assert!(!serde_json::to_string(&sources).unwrap().contains("pw5"));
    assert!(sources.missing(set).is_empty());
    let missing = sources.missing(|_| false);
    assert_eq!(missing.len(), 1);
    assert!(
        missing[0].contains("B_PASSWORD is not set") && missing[0].contains("export B_PASSWORD="),
        "{missing:?}"
    );

    let s = study(&dir, "name: t\nset: {broker_metrics.password: pw6}\n");
    let sources = SecretSources::of(&s, &[], set);
    assert_eq!(
        sources.study_file,
        Some(dir.join("study.yaml").display().to_string())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
