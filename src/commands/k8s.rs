//! `brokerbench k8s render`: Kubernetes manifests that run a workload as N shards of an
//! Indexed Job (each pod one `brokerbench run --shards N`, its index from
//! JOB_COMPLETION_INDEX), shard 0 reachable through a headless Service, every shard writing
//! to one results volume, and a Job that merges them afterwards.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use brokerbench_model::load_specs;
use serde_json::{json, Value};

use crate::families::REGISTRY;
use crate::BadInput;

/// The coordinator's port in the pods.
const COORDINATOR_PORT: u16 = 7878;
/// Where the files and results are mounted in the pods.
const FILES: &str = "/etc/brokerbench";
const RESULTS: &str = "/results";
const DRIVER: &str = "/etc/brokerbench-driver";

pub struct RenderArgs<'a> {
    pub shards: u32,
    pub workload: &'a Path,
    pub driver: &'a Path,
    pub overrides: &'a [String],
    pub out: Option<&'a Path>,
    pub image: &'a str,
    pub name: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub storage_class: Option<&'a str>,
    pub results_size: &'a str,
    pub cpu: &'a str,
}

pub fn render(args: RenderArgs<'_>) -> anyhow::Result<ExitCode> {
    let (specs, family) = checked_inputs(&args)?;
    let name = job_name(&args, &specs.workload.name)?;
    let out = args
        .out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("deploy/kubernetes").join(&name));
    let objects = Objects {
        args: &args,
        name: name.clone(),
    };
    let files = [
        ("00-files.yaml", objects.files()?),
        ("10-results.yaml", vec![objects.claim()]),
        ("20-shards.yaml", vec![objects.service(), objects.shards()]),
        ("merge/30-merge.yaml", vec![objects.merge()]),
        ("merge/40-results-pod.yaml", vec![objects.reader()]),
    ];
    write_manifests(&args, &out, &files)?;
    println!(
        "wrote {} ({} shards of '{}' against {}):",
        out.display(),
        args.shards,
        specs.workload.name,
        family.title()
    );
    print_next_steps(&args, &name, &out);
    Ok(ExitCode::SUCCESS)
}

/// The workload and driver file, loaded with the same --set as the pods will; refuses,
/// before anything is written, what cannot run as shards in Kubernetes.
fn checked_inputs(
    args: &RenderArgs<'_>,
) -> anyhow::Result<(
    brokerbench_model::Specs,
    &'static dyn brokerbench_family::Family,
)> {
    if args.shards == 0 {
        return Err(
            BadInput("--shards 0: give the number of load generators, 1 or more".into()).into(),
        );
    }
    let specs = load_specs(
        &REGISTRY.schemas(),
        Some(args.workload),
        Some(args.driver),
        args.overrides,
    )?;
    let family = REGISTRY
        .get(specs.driver.name())
        .expect("a validated driver file names a registered family");
    if family.address(&specs.driver)?.is_none() {
        return Err(BadInput(format!(
            "{}: the driver file names no broker, so a run would start a local one; in Kubernetes every shard must reach the same broker: set `{}` to its address as the pods see it",
            args.driver.display(),
            family.address_field()
        ))
        .into());
    }
    let workload = &specs.workload;
    let producers = workload.producer_count() as usize;
    // The driver's own subscriptions (e.g. RabbitMQ's queues_per_topic) count: nothing is
    // connected to.
    let subscriptions = family
        .driver(&specs.driver, None)?
        .subscriptions_per_topic();
    let slots = brokerbench_engine::shard::consumer_slots(workload, subscriptions);
    if args.shards as usize > producers.max(slots) {
        return Err(BadInput(format!(
            "--shards {}: the workload has {producers} producer(s) and {slots} consumer(s), shared out one by one, so at most {} shard(s) have something to do",
            args.shards,
            producers.max(slots)
        ))
        .into());
    }
    if workload.backlog.is_some() {
        return Err(BadInput(format!(
            "{}: field `backlog`: backlog mode does not run as shards yet; run it as one process",
            args.workload.display()
        ))
        .into());
    }
    Ok((specs, family))
}

/// The Job's name: --name, else `brokerbench-<workload name>` as a DNS label.
fn job_name(args: &RenderArgs<'_>, workload: &str) -> anyhow::Result<String> {
    let name = match args.name {
        Some(n) => n.to_string(),
        None => dns_label(&format!("brokerbench-{workload}")),
    };
    if !is_dns_label(&name) || name.len() > 52 {
        return Err(BadInput(format!(
            "--name {name}: Kubernetes names here are lower-case letters, digits and '-', starting with a letter, at most 52 characters (the Job adds a suffix per pod)"
        ))
        .into());
    }
    Ok(name)
}

/// The Kubernetes objects of one rendering, each named after the Job.
struct Objects<'a> {
    args: &'a RenderArgs<'a>,
    name: String,
}

impl Objects<'_> {
    fn meta(&self, object: &str) -> Value {
        let mut m = json!({"name": object, "labels": self.labels()});
        if let Some(ns) = self.args.namespace {
            m["namespace"] = json!(ns);
        }
        m
    }
    fn labels(&self) -> Value {
        json!({"app.kubernetes.io/name": "brokerbench", "app.kubernetes.io/instance": self.name})
    }
    fn files_name(&self) -> String {
        format!("{}-files", self.name)
    }
    fn driver_secret(&self) -> String {
        format!("{}-driver", self.name)
    }
    fn claim_name(&self) -> String {
        format!("{}-results", self.name)
    }

    /// The workload in a ConfigMap; the driver file, which may hold credentials, in a Secret.
    fn files(&self) -> anyhow::Result<Vec<Value>> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
        };
        let config_map = json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": self.meta(&self.files_name()),
            "data": {"workload.yaml": read(self.args.workload)?},
        });
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": self.meta(&self.driver_secret()),
            "type": "Opaque",
            "stringData": {"driver.yaml": read(self.args.driver)?},
        });
        Ok(vec![config_map, secret])
    }

    /// The results volume every shard and the merge write to.
    fn claim(&self) -> Value {
        let mut spec = json!({
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": self.args.results_size}},
        });
        if let Some(class) = self.args.storage_class {
            spec["storageClassName"] = json!(class);
        }
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": self.meta(&self.claim_name()),
            "spec": spec,
        })
    }

    /// The headless Service through which shards reach shard 0, the coordinator.
    fn service(&self) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": self.meta(&self.name),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "selector": {"job-name": self.name},
                "ports": [{"name": "coordinator", "port": COORDINATOR_PORT, "targetPort": COORDINATOR_PORT}],
            },
        })
    }

    /// The Indexed Job of the shards.
    fn shards(&self) -> Value {
        let args = self.args;
        json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": self.meta(&self.name),
            "spec": {
                "completionMode": "Indexed",
                "completions": args.shards,
                "parallelism": args.shards,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": self.labels()},
                    "spec": {
                        "subdomain": self.name,
                        "restartPolicy": "Never",
                        "containers": [self.shard_container()],
                        "volumes": [
                            {"name": "files", "configMap": {"name": self.files_name()}},
                            {"name": "driver", "secret": {"secretName": self.driver_secret()}},
                            {"name": "results", "persistentVolumeClaim": {"claimName": self.claim_name()}},
                        ],
                    },
                },
            },
        })
    }

    fn shard_container(&self) -> Value {
        let args = self.args;
        json!({
            "name": "brokerbench",
            "image": args.image,
            "command": ["brokerbench"],
            "args": shard_args(&self.name, args.shards, args.overrides),
            "env": [{
                // Every pod of one Job has its uid: one run id for the shards,
                // another for the next Job.
                "name": "BROKERBENCH_RUN_ID",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}},
            }],
            "ports": [{"name": "coordinator", "containerPort": COORDINATOR_PORT}],
            "resources": {"requests": {"cpu": args.cpu, "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
            "volumeMounts": [
                {"name": "files", "mountPath": FILES, "readOnly": true},
                // Beside the ConfigMap, not inside it: its volume is read-only.
                {"name": "driver", "mountPath": DRIVER, "readOnly": true},
                {"name": "results", "mountPath": RESULTS},
            ],
        })
    }

    /// The Job that merges the newest run's shards, applied once the shards completed.
    fn merge(&self) -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": self.meta(&format!("{}-merge", self.name)),
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": self.labels()},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "merge",
                            "image": self.args.image,
                            "command": ["brokerbench"],
                            // The newest run's shards under the folder, merged beside them.
                            "args": merge_args(&self.name),
                            "volumeMounts": [{"name": "results", "mountPath": RESULTS}],
                        }],
                        "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": self.claim_name()}}],
                    },
                },
            },
        })
    }

    /// A pod that mounts the results read-only, to copy them out with `kubectl cp`.
    fn reader(&self) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": self.meta(&self.claim_name()),
            "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "results",
                    "image": self.args.image,
                    "command": ["sleep", "3600"],
                    "volumeMounts": [{"name": "results", "mountPath": RESULTS, "readOnly": true}],
                }],
                "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": self.claim_name(), "readOnly": true}}],
            },
        })
    }
}

/// Writes each file of `files` under `out`: a header saying what rendered it, then its
/// documents.
fn write_manifests(
    args: &RenderArgs<'_>,
    out: &Path,
    files: &[(&str, Vec<Value>)],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out.join("merge"))
        .with_context(|| format!("creating {}", out.display()))?;
    for (file, documents) in files {
        let mut text = format!(
            "# Rendered by `brokerbench k8s render --shards {}` from {} and {}.\n",
            args.shards,
            args.workload.display(),
            args.driver.display()
        );
        for document in documents {
            text.push_str("---\n");
            text.push_str(&to_yaml(document)?);
        }
        let path = out.join(file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The kubectl commands that run the rendering, wait for it and fetch the results.
fn print_next_steps(args: &RenderArgs<'_>, name: &str, out: &Path) {
    let ns = args
        .namespace
        .map(|n| format!(" -n {n}"))
        .unwrap_or_default();
    println!("  kubectl apply{ns} -f {}", out.display());
    println!("  kubectl wait{ns} --for=condition=complete job/{name} --timeout=30m");
    println!("  kubectl apply{ns} -f {}", out.join("merge").display());
    println!("  kubectl wait{ns} --for=condition=complete job/{name}-merge --timeout=10m");
    println!("  kubectl logs{ns} job/{name}-merge");
    println!(
        "  kubectl cp{ns} {name}-results:{RESULTS}/{name} ./{name}-results   # the merged folder and report.html"
    );
    println!(
        "the driver file is in {} as a Secret; keep that file private",
        out.join("00-files.yaml").display()
    );
}

/// What each shard's pod runs: its share of the workload, results on the volume. A run with
/// lost messages or errors still exits 0 (they are in its results), so that the Job
/// completes and the merge follows; pods are scheduled and pull the image at different times,
/// hence a long wait for each other.
fn shard_args(name: &str, shards: u32, overrides: &[String]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        format!("{FILES}/workload.yaml"),
        "--driver".into(),
        format!("{DRIVER}/driver.yaml"),
        "--shards".into(),
        shards.to_string(),
        "--coordinator".into(),
        format!("{name}-0.{name}:{COORDINATOR_PORT}"),
        "--shard-timeout".into(),
        "10m".into(),
        "--exit-zero-on-errors".into(),
        "--out".into(),
        format!("{RESULTS}/{name}/$(BROKERBENCH_RUN_ID)/shard-$(JOB_COMPLETION_INDEX)"),
    ];
    for assignment in overrides {
        args.push("--set".into());
        args.push(assignment.clone());
    }
    args
}

/// What the merge Job runs: the newest run's shards under the folder, merged beside them.
fn merge_args(name: &str) -> Vec<String> {
    vec![
        "merge".into(),
        format!("{RESULTS}/{name}"),
        "--exit-zero-on-errors".into(),
    ]
}

fn to_yaml(value: &Value) -> anyhow::Result<String> {
    serde_saphyr::to_string(value).map_err(|e| anyhow::anyhow!("writing YAML: {e}"))
}

fn is_dns_label(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `text` as a DNS label: lower case, other characters as '-', at most 52 characters.
fn dns_label(text: &str) -> String {
    let mut label: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    label.truncate(52);
    label.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_pods_arguments_are_ones_brokerbench_takes() {
        let overrides = ["rate=1000".to_string()];
        for args in [shard_args("bb", 4, &overrides), merge_args("bb")] {
            // Kubernetes replaces $(VAR) with the container's variable before the start.
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    a.replace("$(BROKERBENCH_RUN_ID)", "uid")
                        .replace("$(JOB_COMPLETION_INDEX)", "0")
                })
                .collect();
            let parsed = crate::cli::Cli::try_parse_from(
                std::iter::once("brokerbench".to_string()).chain(args.iter().cloned()),
            );
            assert!(parsed.is_ok(), "{args:?}: {}", parsed.unwrap_err());
        }
    }
}
