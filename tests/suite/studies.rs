//! The bundled studies in `studies/`: every one planned (`--dry-run` checks every cell of its
//! grid before it lists the runs), and one real cell of those whose mechanism runs nowhere
//! else: Pulsar's standalone of three bookies (replication-cost) here, Kafka at 1,000 topics,
//! 1,000 partitions and 64 producers and consumers (client-scale-*) in kafka/scale.rs. A study
//! that moves from one family's managed broker to another's, in a home of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{brokerbench, link_jvm_distributions, serial, write, OwnHome};

/// The folder of the bundled studies.
fn studies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("studies")
}

/// The bundled study `name`, read.
fn read_study(name: &str) -> serde_json::Value {
    let path = studies_dir().join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    brokerbench_model::yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Cells × repetitions of a grid study, counted from its file: the product of its axes'
/// lengths (a `a+b` axis is one list), times `repetitions` (1 when absent).
fn planned(study: &serde_json::Value) -> (usize, usize) {
    let cells = study["axes"].as_object().map_or(1, |axes| {
        axes.values()
            .map(|v| v.as_array().map_or(1, Vec::len))
            .product()
    });
    let repetitions = study["repetitions"].as_u64().unwrap_or(1) as usize;
    (cells, cells * repetitions)
}

#[test]
fn every_bundled_study_plans_every_run() {
    let mut names: Vec<String> = std::fs::read_dir(studies_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".yaml").map(str::to_string))
        .collect();
    names.sort();
    assert!(names.len() >= 13, "{names:?}");
    for name in names {
        let study = read_study(&name);
        let output = brokerbench()
            .arg("study")
            .arg(studies_dir().join(format!("{name}.yaml")))
            .arg("--dry-run")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let listed = stdout.lines().filter(|l| l.contains(" rep ")).count();
        if study["set"]["rate"] == "find" || study["workload"]["rate"] == "find" {
            assert!(stdout.contains("searches"), "{name}: {stdout}");
            continue;
        }
        let (cells, runs) = planned(&study);
        let head = format!("{cells} cell(s), {runs} runs");
        assert!(stdout.contains(&head), "{name}: {head}: {stdout}");
        assert_eq!(listed, runs, "{name}: {stdout}");
    }
}

/// The bundled study `name` with each axis narrowed to its entry `index` (one cell), its
/// relative paths made absolute, written into `dir`; the new file.
pub fn one_cell_of(name: &str, index: usize, dir: &Path) -> PathBuf {
    let mut study = read_study(name);
    if let Some(axes) = study["axes"].as_object_mut() {
        for values in axes.values_mut() {
            let one = values[index].clone();
            *values = serde_json::json!([one]);
        }
    }
    absolute_paths(&mut study, &studies_dir());
    study["name"] = serde_json::json!(format!("{name}-cell{}", index + 1));
    // YAML is a superset of JSON.
    write(dir, &format!("{name}.yaml"), &study.to_string())
}

/// Every string of `value` that is a relative path (`../`, `./`) made absolute from `base`.
fn absolute_paths(value: &mut serde_json::Value, base: &Path) {
    match value {
        serde_json::Value::String(text) if text.starts_with("../") || text.starts_with("./") => {
            *text = base.join(&*text).display().to_string();
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| absolute_paths(v, base)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| absolute_paths(v, base)),
        _ => {}
    }
}

/// Runs a study file with `--quick` (in the environment `env`); its folder and what it printed.
pub fn run_quick(file: &Path, env: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("study");
    let output = brokerbench()
        .envs(env.iter().copied())
        .current_dir(dir.path())
        .arg("study")
        .arg(file)
        .args(["--quick", "--no-monitor", "--out"])
        .arg(&folder)
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (dir, folder, stdout)
}

/// Every one of the `runs` planned runs completed and was tabled.
pub fn assert_all_complete(folder: &Path, runs: usize, stdout: &str) {
    let mut reader = csv::Reader::from_path(folder.join("runs.csv")).unwrap();
    let status = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "status")
        .unwrap();
    let statuses: Vec<String> = reader
        .records()
        .map(|r| r.unwrap()[status].to_string())
        .collect();
    assert_eq!(statuses.len(), runs, "{stdout}");
    assert!(
        statuses.iter().all(|s| s == "complete"),
        "{statuses:?}\n{stdout}"
    );
}

/// replication-cost's cell of Pulsar with three copies: a standalone of three bookies (the run
/// itself, ensemble 3, needs the admin API to count three bookies before it starts), in a
/// home of its own.
#[test]
fn replication_costs_pulsar_cell_runs_on_three_bookies() {
    let _s = serial();
    let home = OwnHome::new();
    link_jvm_distributions(home.home.path());
    let scratch = tempfile::tempdir().unwrap();
    let file = one_cell_of("replication-cost", 7, scratch.path());
    let (_dir, folder, stdout) = run_quick(&file, &home.env());
    assert_all_complete(&folder, 1, &stdout);
    assert!(
        stdout.contains("broker: pulsar up with 3 nodes"),
        "{stdout}"
    );
    let manifest = folder.join("runs/c001-r1/manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    assert_eq!(
        manifest["broker"]["nodes"].as_array().map(Vec::len),
        Some(3),
        "{manifest:#}"
    );
}

/// A study whose cells are on two families takes the first family's managed broker down
/// before it starts the second's (here Redis, then mosquitto: the two quickest to start).
#[test]
fn a_study_over_two_families_takes_the_first_down_before_the_second_starts() {
    let _s = serial();
    let home = OwnHome::new();
    let scratch = tempfile::tempdir().unwrap();
    let drivers = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/drivers");
    let file = write(
        scratch.path(),
        "two-families.yaml",
        &format!(
            "name: two-families\nset: {{rate: 1000}}\naxes:\n  driver+broker.nodes: [[{}, 1], [{}, 1]]\norder: sequential\n",
            drivers.join("redis.yaml").display(),
            drivers.join("mqtt.yaml").display()
        ),
    );
    let (_dir, folder, stdout) = run_quick(&file, &home.env());
    assert_all_complete(&folder, 2, &stdout);
    let said = |line: &str| {
        stdout
            .find(line)
            .unwrap_or_else(|| panic!("{line}:\n{stdout}"))
    };
    assert!(said("broker: redis up with 1 node") < said("broker: redis down"));
    assert!(said("broker: redis down") < said("broker: mqtt up with 1 node"));
}
