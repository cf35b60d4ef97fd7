//! A broker of several nodes in the samples: its nodes' samples on their own, and one sample
//! per role with the nodes summed.

use super::target::{ProcessSample, Role};

/// The broker's samples when it has several nodes (one target each), else none.
pub fn broker_nodes(samples: &[ProcessSample]) -> Vec<ProcessSample> {
    let nodes: Vec<ProcessSample> = samples
        .iter()
        .filter(|s| s.role == Role::Broker)
        .cloned()
        .collect();
    match nodes.len() {
        0 | 1 => Vec::new(),
        _ => nodes,
    }
}

/// One sample per role, in the order each role first appears: the samples of the targets of
/// one role (the nodes of a broker) summed. The sum is alive while any member is; it is lost
/// when every member is (at the latest loss); an interval value is known when any member's is.
pub fn sum_by_role(samples: Vec<ProcessSample>) -> Vec<ProcessSample> {
    let mut summed: Vec<ProcessSample> = Vec::with_capacity(samples.len());
    for sample in samples {
        match summed.iter_mut().find(|s| s.role == sample.role) {
            Some(total) => add_sample(total, &sample),
            None => summed.push(sample),
        }
    }
    summed
}

fn add_sample(total: &mut ProcessSample, more: &ProcessSample) {
    fn add<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        }
    }
    total.lost_at_ns = match (total.alive, more.alive) {
        (false, false) => total.lost_at_ns.max(more.lost_at_ns),
        _ => None,
    };
    total.alive |= more.alive;
    total.processes += more.processes;
    total.cpu_user_pct = add(total.cpu_user_pct, more.cpu_user_pct);
    total.cpu_system_pct = add(total.cpu_system_pct, more.cpu_system_pct);
    total.rss_bytes = add(total.rss_bytes, more.rss_bytes);
    total.disk_read_bytes = add(total.disk_read_bytes, more.disk_read_bytes);
    total.disk_written_bytes = add(total.disk_written_bytes, more.disk_written_bytes);
    total.threads = add(total.threads, more.threads);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(role: Role, alive: bool, cpu: Option<f64>, rss: Option<u64>) -> ProcessSample {
        ProcessSample {
            role,
            root_pid: 1,
            node: None,
            alive,
            lost_at_ns: (!alive).then_some(5),
            processes: u32::from(alive),
            cpu_user_pct: cpu,
            cpu_system_pct: cpu,
            rss_bytes: rss,
            disk_read_bytes: None,
            disk_written_bytes: Some(10),
            threads: Some(2),
        }
    }

    #[test]
    fn the_nodes_of_a_broker_are_summed_into_one_sample() {
        let client = node(Role::Client, true, Some(1.0), Some(1));
        let samples = vec![
            node(Role::Broker, true, Some(20.0), Some(100)),
            client.clone(),
            node(Role::Broker, false, None, None),
            node(Role::Broker, true, Some(30.0), Some(200)),
        ];
        let summed = sum_by_role(samples);
        assert_eq!(summed.len(), 2);
        let broker = &summed[0];
        assert_eq!(broker.role, Role::Broker);
        assert!(broker.alive && broker.lost_at_ns.is_none(), "{broker:?}");
        assert_eq!(broker.processes, 2);
        assert_eq!(broker.cpu_user_pct, Some(50.0));
        assert_eq!(broker.rss_bytes, Some(300));
        assert_eq!(broker.disk_written_bytes, Some(30));
        assert_eq!(broker.disk_read_bytes, None);
        assert_eq!(broker.threads, Some(6));
        assert_eq!(summed[1], client, "the client is left as it was");
        let all_lost = sum_by_role(vec![
            node(Role::Broker, false, None, None),
            node(Role::Broker, false, None, None),
        ]);
        assert!(!all_lost[0].alive && all_lost[0].lost_at_ns == Some(5));
    }
}
