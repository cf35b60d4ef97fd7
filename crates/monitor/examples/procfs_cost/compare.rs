//! Comparing two samples: the figures of each target and of the host that brokerbench and
//! procfs must read alike, and the ones they read differently.

use brokerbench_monitor::{HostSample, ProcessSample, Sample};

/// The figures of a sample that two samplers taken a moment apart must agree on.
pub(super) fn same_figures(a: &Sample, b: &Sample) -> Vec<String> {
    let mut differences = Vec::new();
    for (p, q) in a.processes.iter().zip(&b.processes) {
        differences.extend(process_differences(p, q));
    }
    differences.extend(host_differences(&a.host, &b.host));
    differences
}

/// Notes a figure that brokerbench and procfs read differently.
fn note_difference(differences: &mut Vec<String>, what: &str, x: String, y: String) {
    if x != y {
        differences.push(format!("{what}: brokerbench {x}, procfs {y}"));
    }
}

/// The figures of one target that brokerbench (`p`) and procfs (`q`) read differently.
fn process_differences(p: &ProcessSample, q: &ProcessSample) -> Vec<String> {
    let mut differences = Vec::new();
    let mut differ =
        |what: &str, x: String, y: String| note_difference(&mut differences, what, x, y);
    let role = p.role.as_str();
    differ(
        &format!("{role} alive"),
        p.alive.to_string(),
        q.alive.to_string(),
    );
    differ(
        &format!("{role} processes"),
        p.processes.to_string(),
        q.processes.to_string(),
    );
    differ(
        &format!("{role} threads"),
        format!("{:?}", p.threads),
        format!("{:?}", q.threads),
    );
    differ(
        &format!("{role} has CPU/IO values"),
        format!(
            "{:?}",
            (p.cpu_user_pct.is_some(), p.disk_read_bytes.is_some())
        ),
        format!(
            "{:?}",
            (q.cpu_user_pct.is_some(), q.disk_read_bytes.is_some())
        ),
    );
    // RSS moves a little between two samples of a live process; compare in MB.
    differ(
        &format!("{role} RSS MB"),
        format!("{:?}", p.rss_bytes.map(|b| b >> 20)),
        format!("{:?}", q.rss_bytes.map(|b| b >> 20)),
    );
    differences
}

/// The figures of the host that brokerbench (`h`) and procfs (`k`) read differently.
fn host_differences(h: &HostSample, k: &HostSample) -> Vec<String> {
    let mut differences = Vec::new();
    let mut differ =
        |what: &str, x: String, y: String| note_difference(&mut differences, what, x, y);
    differ(
        "cpu_count",
        h.cpu_count.to_string(),
        k.cpu_count.to_string(),
    );
    differ(
        "host has CPU shares",
        h.cpu.is_some().to_string(),
        k.cpu.is_some().to_string(),
    );
    differ(
        "load_1m (2 decimals)",
        format!("{:.2?}", h.load_1m),
        format!("{:.2?}", k.load_1m),
    );
    differ(
        "page cache MB",
        format!("{:?}", h.page_cache_bytes.map(|b| b >> 20)),
        format!("{:?}", k.page_cache_bytes.map(|b| b >> 20)),
    );
    differ(
        "memory used present",
        h.memory_used_bytes.is_some().to_string(),
        k.memory_used_bytes.is_some().to_string(),
    );
    let names = |s: &HostSample| {
        (
            s.disks
                .as_ref()
                .map(|d| d.iter().map(|d| d.name.clone()).collect::<Vec<_>>()),
            s.network
                .as_ref()
                .map(|n| n.iter().map(|n| n.name.clone()).collect::<Vec<_>>()),
        )
    };
    differ(
        "disks, interfaces",
        format!("{:?}", names(h)),
        format!("{:?}", names(k)),
    );
    differences
}
