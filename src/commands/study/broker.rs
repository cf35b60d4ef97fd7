//! The managed broker a study chose (`broker:` and `broker.*` axes): checked with every run
//! before the first starts, and started with exactly the cell's nodes and settings before
//! each run that asks for another broker than the one running.

use brokerbench_brokers::{cluster, settings, ManagedBroker, UpOptions};
use brokerbench_study::BrokerChoice;

use super::*;

/// A chosen broker needs the managed one, a size its family runs, and settings that `broker
/// up --config` takes.
pub(super) fn check_choice(study: &Study, run: &PlannedRun, specs: &Specs) -> anyhow::Result<()> {
    let file = study.file.display();
    let Some(name) = managed_family(specs) else {
        return Err(BadInput(format!(
            "{file}: broker: the study chooses the managed broker's nodes and settings ({}), but the driver names an external one ({}); remove `broker` and the broker.* axes, or the driver file's address",
            run.broker.describe(),
            specs.driver_source
        ))
        .into());
    };
    let (nodes, max) = (run.broker.node_count(), managed(name).max_nodes());
    if cluster::check_size(name, nodes, max).is_err() {
        return Err(BadInput(format!(
            "{file}: broker.nodes: {nodes}: the managed {name} runs 1 to {max} node(s)"
        ))
        .into());
    }
    if settings::parse(&run.broker.config_arguments()).is_err() {
        return Err(BadInput(format!(
            "{file}: broker.config: {}: a server setting's key is letters, digits and . _ - and its value one line, e.g. config: {{num.io.threads: 4}}",
            run.broker.config_arguments().join(", ")
        ))
        .into());
    }
    Ok(())
}

/// The options `broker up` starts the chosen broker with: exactly its nodes and settings
/// (none: the family's defaults).
fn up_options(choice: &BrokerChoice) -> anyhow::Result<UpOptions> {
    Ok(UpOptions {
        nodes: Some(choice.node_count()),
        settings: Some(settings::parse(&choice.config_arguments()).map_err(BadInput)?),
    })
}

fn managed(name: &str) -> Box<dyn ManagedBroker> {
    let family = REGISTRY.get(name).expect("a family the study checked");
    family.managed(&brokerbench_brokers::home())
}

impl Executor<'_> {
    /// Before a run: the managed broker its cell chose, unless this study started that one
    /// already and keeps it (`restart`: take it down and start it again in any case). A broker
    /// running with other nodes or settings is taken down first. Nothing for a study that
    /// chose no broker.
    pub(super) fn ensure_broker(&mut self, run: &PlannedRun, restart: bool) -> anyhow::Result<()> {
        if !run.broker.is_set() {
            return Ok(());
        }
        let specs = run
            .specs(&REGISTRY.schemas(), self.study, &[])
            .map_err(|e| BadInput(e.to_string()))?;
        let Some(name) = managed_family(&specs) else {
            return Ok(());
        };
        let chosen = Some((name, run.broker.clone()));
        if !restart && self.broker_now == chosen {
            return Ok(());
        }
        // The broker of another family that this study started would share the machine
        // with this run's.
        if let Some((other, _)) = self.broker_now.take().filter(|(other, _)| *other != name) {
            managed(other).down()?;
            println!("broker: {other} down");
        }
        let broker = managed(name);
        let options = up_options(&run.broker)?;
        if restart || broker.up_with(&options).is_err() {
            broker.down()?;
            broker.up_with(&options).with_context(|| {
                format!(
                    "starting the managed {name} with {} for cell {}",
                    run.broker.describe(),
                    run.cell + 1
                )
            })?;
        }
        println!("broker: {name} up with {}", run.broker.describe());
        self.broker_now = chosen;
        Ok(())
    }
}
