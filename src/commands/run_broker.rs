//! Which broker a run talks to (the one the driver file names, else the family's managed
//! one), which process to sample, and how to read its metrics endpoint.

use brokerbench_brokers::{BrokerStatus, NodeUrl};
use brokerbench_driver::Driver;
use brokerbench_family::Family;
use brokerbench_metrics::{BrokerMetrics, Endpoint, EndpointSettings, MetricSet, Scraper};
use brokerbench_model::DriverConfig;
use brokerbench_report::BrokerInfo;

use crate::cli::RunArgs;
use crate::families::REGISTRY;
use crate::BadInput;

/// The broker a run talks to, and how to watch it.
pub(super) struct BrokerTarget {
    pub(super) driver: Box<dyn Driver>,
    pub(super) broker: BrokerInfo,
    /// Processes to sample: one per node of the broker, as far as they are known.
    pub(super) processes: Vec<WatchedProcess>,
    /// Metrics endpoints of a managed broker (node 1's first), read together.
    pub(super) metrics_urls: Vec<NodeUrl>,
    /// What that endpoint serves, from the family.
    pub(super) metrics: Option<&'static MetricSet>,
}

/// A broker process to sample.
pub(super) struct WatchedProcess {
    pub(super) pid: u32,
    /// The node of a managed broker it is.
    pub(super) node: Option<u32>,
    /// How to find it again after it restarts (a managed broker's status, or
    /// `--broker-process`'s name).
    pub(super) refind: Option<Box<dyn Fn() -> Option<u32> + Send + Sync>>,
}

/// Every running node of the managed broker of `family`, each found again by its node id
/// after a restart.
fn managed_processes(family: &'static dyn Family, status: &BrokerStatus) -> Vec<WatchedProcess> {
    status
        .nodes
        .iter()
        .filter_map(|node| Some((node.id, node.pid?)))
        .map(|(id, pid)| WatchedProcess {
            pid,
            node: Some(id),
            refind: Some(Box::new(move || {
                let managed = family.managed(&brokerbench_brokers::home());
                let status = managed.status().ok().flatten()?;
                status.nodes.iter().find(|n| n.id == id)?.pid
            })),
        })
        .collect()
}

/// The nodes' addresses of a managed broker of several nodes; none for one node.
fn cluster_addresses(status: &BrokerStatus) -> Vec<String> {
    match status.nodes.len() {
        0 | 1 => Vec::new(),
        _ => status.nodes.iter().map(|n| n.address.clone()).collect(),
    }
}

/// Resolves the driver file and flags into a driver, starting the family's managed broker if
/// the driver file names no broker address.
pub(super) fn broker_target(driver: &DriverConfig, args: &RunArgs) -> anyhow::Result<BrokerTarget> {
    let family = REGISTRY
        .get(driver.name())
        .expect("a validated driver file names a registered family");
    let mut target = match family.address(driver)? {
        Some(address) => match running_managed_named(family, &address) {
            Some(managed) => {
                say_watched(family, &managed.0);
                let clients = family.driver(driver, None)?;
                managed_target(family, clients, address, managed)
            }
            None => BrokerTarget {
                driver: family.driver(driver, None)?,
                broker: BrokerInfo {
                    address,
                    version: None,
                    managed: false,
                    nodes: Vec::new(),
                    settings: Default::default(),
                },
                processes: Vec::new(),
                metrics_urls: Vec::new(),
                metrics: family.metrics(),
            },
        },
        None => {
            let (status, client_address, metrics_urls) = super::broker::managed(family)?;
            let clients = family.driver(driver, Some(&client_address))?;
            let address = status.address.clone();
            managed_target(family, clients, address, (status, metrics_urls))
        }
    };
    if let Some(pid) = args.broker_pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(BadInput(format!("--broker-pid {pid}: no such process")).into());
        }
        target.processes = vec![WatchedProcess {
            pid,
            node: None,
            refind: None,
        }];
    }
    if let Some(name) = &args.broker_process {
        let pids = brokerbench_monitor::find_pids_by_name(name);
        let again = name.clone();
        let refind: Box<dyn Fn() -> Option<u32> + Send + Sync> =
            Box::new(
                move || match brokerbench_monitor::find_pids_by_name(&again).as_slice() {
                    [pid] => Some(*pid),
                    _ => None,
                },
            );
        let pid = match pids.as_slice() {
            [pid] => *pid,
            [] => return Err(BadInput(format!("--broker-process {name}: no running process matches; give --broker-pid PID instead")).into()),
            many => {
                return Err(BadInput(format!(
                    "--broker-process {name}: {} processes match ({many:?}); give --broker-pid PID instead",
                    many.len()
                ))
                .into())
            }
        };
        target.processes = vec![WatchedProcess {
            pid,
            node: None,
            refind: Some(refind),
        }];
    }
    Ok(target)
}

/// Whether a run with `driver` uses the family's managed broker (its driver file names no
/// address, or one of the running managed broker's nodes), found without starting anything.
pub(super) fn uses_managed(driver: &DriverConfig) -> anyhow::Result<bool> {
    let family = REGISTRY
        .get(driver.name())
        .expect("a validated driver file names a registered family");
    Ok(match family.address(driver)? {
        None => true,
        Some(address) => running_managed_named(family, &address).is_some(),
    })
}

/// The family's managed broker, running, when `address` (the driver file's) names one of its
/// nodes' client addresses on this machine (OMB's files name `localhost:9092`): its status and
/// metrics endpoints.
fn running_managed_named(
    family: &'static dyn Family,
    address: &str,
) -> Option<(BrokerStatus, Vec<NodeUrl>)> {
    let managed = family.managed(&brokerbench_brokers::home());
    let status = managed.status().ok().flatten()?;
    let ports: Vec<u16> = status
        .nodes
        .iter()
        .filter_map(|n| n.address.rsplit(':').next()?.parse().ok())
        .collect();
    let named = local_ports(address).iter().any(|p| ports.contains(p));
    named.then(|| (status, managed.metrics_urls()))
}

/// The ports of the IPv4 loopback hosts an address names: `localhost:9092,127.0.0.1:9093`,
/// `amqp://user@localhost:5672/vhost` and `nats://127.0.0.1:4222` each give theirs.
fn local_ports(address: &str) -> Vec<u16> {
    address
        .split(',')
        .filter_map(|one| {
            let one = one.trim();
            let one = one.split_once("://").map_or(one, |(_, rest)| rest);
            let authority = one.split(['/', '?', '#']).next()?;
            let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
            let (host, port) = host_port.rsplit_once(':')?;
            // The managed nodes listen on 127.0.0.1 only.
            let local = ["localhost", "127.0.0.1"].contains(&host);
            local.then(|| port.parse().ok()).flatten()
        })
        .collect()
}

/// Says that the driver file's address is the managed broker's (`status`), so it is watched.
fn say_watched(family: &dyn Family, status: &BrokerStatus) {
    eprintln!(
        "note: the driver file's {} names the managed {} (pid {}): its processes are sampled and its metrics read",
        family.address_field(),
        family.title(),
        status.pid
    );
}

/// A run on the managed broker (`status`, its metrics endpoints): every node sampled, its
/// metrics read; `driver`'s clients connect to `address` (the managed broker's, or the one
/// the driver file names, which is a node of it).
fn managed_target(
    family: &'static dyn Family,
    driver: Box<dyn Driver>,
    address: String,
    (status, metrics_urls): (BrokerStatus, Vec<NodeUrl>),
) -> BrokerTarget {
    BrokerTarget {
        driver,
        processes: managed_processes(family, &status),
        broker: BrokerInfo {
            nodes: cluster_addresses(&status),
            settings: status.settings.iter().cloned().collect(),
            address,
            version: Some(status.version),
            managed: true,
        },
        metrics_urls,
        metrics: family.metrics(),
    }
}

/// The broker's metrics endpoint and how to read it: the URL from `--broker-metrics`, else
/// the driver file's `broker_metrics.url`, else the managed broker's own; credentials and CA
/// from the URL, then the driver file, then the environment; the timeout from the file. Checked here, before the run starts;
/// nothing is read with `--no-monitor`.
pub(super) fn metrics_scraper(
    specs: &brokerbench_model::Specs,
    args: &RunArgs,
    managed_urls: Vec<NodeUrl>,
    set: Option<&'static MetricSet>,
) -> anyhow::Result<Option<BrokerMetrics>> {
    if args.no_monitor {
        return Ok(None);
    }
    let spec = specs.driver.broker_metrics();
    let (url, source) = match (&args.broker_metrics, spec.and_then(|s| s.url.clone())) {
        (Some(url), _) => (url.clone(), "--broker-metrics".to_string()),
        (None, Some(url)) => (
            url,
            format!("{}: field `broker_metrics.url`", specs.driver_source),
        ),
        (None, None) => match managed_urls.first() {
            Some((_, url)) => (url.clone(), "the managed broker".to_string()),
            None => return Ok(None),
        },
    };
    let (first, others) = match (source.as_str(), managed_urls.first()) {
        ("the managed broker", Some((first, _))) => (*first, other_nodes(&managed_urls[1..])?),
        _ => (1, Vec::new()),
    };
    let Some(set) = set else { return Ok(None) };
    let mut endpoint = Endpoint::with_schemes(&url, set.format.schemes())
        .map_err(|e| BadInput(format!("{source}: {e}")))?;
    if let Some(spec) = spec {
        endpoint = endpoint.fill_missing(EndpointSettings {
            username: spec.username.clone(),
            password: spec.password.clone(),
            bearer_token: spec.bearer_token.clone(),
            ca_file: spec.ca_file.clone(),
        });
        if let Some(timeout) = spec.timeout {
            endpoint = endpoint.timeout(timeout);
        }
    }
    let scraper = Scraper::new(endpoint.with_environment())
        .map_err(|e| BadInput(format!("{source}: {e}")))?;
    Ok(Some(
        BrokerMetrics::new(scraper, set).with_other_nodes(first, others),
    ))
}

/// Scrapers of the other nodes' endpoints of a managed cluster, with their node ids.
fn other_nodes(urls: &[NodeUrl]) -> anyhow::Result<Vec<(u32, Scraper)>> {
    urls.iter()
        .map(|(id, url)| {
            let endpoint = Endpoint::new(url).map_err(|e| BadInput(format!("{url}: {e}")))?;
            let scraper = Scraper::new(endpoint).map_err(|e| BadInput(format!("{url}: {e}")))?;
            Ok((*id, scraper))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gives_the_ports_of_its_loopback_hosts() {
        assert_eq!(local_ports("localhost:9092"), [9092]);
        assert_eq!(
            local_ports("localhost:9092, 127.0.0.1:9093,kafka-1:9094"),
            [9092, 9093]
        );
        assert_eq!(local_ports("amqp://user:secret@localhost:5672/%2f"), [5672]);
        assert_eq!(local_ports("nats://127.0.0.1:4322"), [4322]);
        assert_eq!(
            local_ports("amqp://localhost:5672/v@h?heartbeat=10"),
            [5672]
        );
        assert_eq!(local_ports("amqp://localhost:5672?heartbeat=10"), [5672]);
        assert!(
            local_ports("tls://[::1]:4222").is_empty(),
            "not where the nodes listen"
        );
        assert!(local_ports("broker.example.com:9092").is_empty());
        assert!(local_ports("localhost").is_empty());
    }
}
