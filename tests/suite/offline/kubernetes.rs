//! The Kubernetes manifests for shards: rendered as committed, and valid (kubernetes-validate,
//! offline).

use std::path::Path;

use crate::common::shards::succeeds;
use crate::common::*;

#[test]
fn kubernetes_manifests_are_rendered_as_committed_and_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let stdout = succeeds(
        brokerbench()
            .current_dir(root)
            .args([
                "k8s",
                "render",
                "--shards",
                "4",
                "deploy/kubernetes/scale-out.yaml",
                "deploy/kubernetes/kafka.yaml",
                "-o",
            ])
            .arg(out.path()),
    );
    assert!(stdout.contains("kubectl apply -f"), "{stdout}");
    let committed = root.join("deploy/kubernetes/brokerbench-scale-out");
    let files = files_under(&committed);
    assert_eq!(files.len(), 5, "{files:?}");
    for file in &files {
        let relative = file.strip_prefix(&committed).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join(relative)).unwrap(),
            std::fs::read_to_string(file).unwrap(),
            "{} differs from what `k8s render` writes: render it again",
            relative.display()
        );
    }
    let jobs = std::fs::read_to_string(out.path().join("20-shards.yaml")).unwrap();
    for expected in [
        "completionMode: Indexed",
        "completions: 4",
        "parallelism: 4",
        "clusterIP: None",
        "batch.kubernetes.io/controller-uid",
    ] {
        assert!(jobs.contains(expected), "{expected}: {jobs}");
    }
    // Offline validation against the Kubernetes schemas (scripts/test installs the tool).
    let validate = std::env::var("BROKERBENCH_TEST_KUBERNETES_VALIDATE").unwrap_or_else(|_| {
        panic!("set BROKERBENCH_TEST_KUBERNETES_VALIDATE to kubernetes-validate (scripts/test installs it)")
    });
    let rendered = files_under(out.path());
    let check = std::process::Command::new(&validate)
        .arg("--strict")
        .args(&rendered)
        .output()
        .unwrap_or_else(|e| panic!("{validate}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(check.status.success(), "{text}");
    assert_eq!(text.matches(" passed for resource ").count(), 7, "{text}");
    // A broken manifest is caught: the check can fail.
    let broken = out.path().join("20-shards.yaml");
    std::fs::write(
        &broken,
        jobs.replace("completionMode: Indexed", "completionMode: 7"),
    )
    .unwrap();
    let check = std::process::Command::new(&validate)
        .arg("--strict")
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!check.status.success());

    // A driver file that names no broker cannot be deployed.
    let output = brokerbench()
        .current_dir(root)
        .args([
            "k8s",
            "render",
            "--shards",
            "2",
            "workloads/quickstart.yaml",
            "workloads/drivers/kafka.yaml",
            "-o",
        ])
        .arg(out.path().join("no"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("set `bootstrap_servers`"), "{stderr}");
}
