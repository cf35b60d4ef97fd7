//! Tests that need no broker: the CLI, the docs and their examples, the families' files, OMB's
//! driver files, input refused before anything starts, the Kubernetes manifests, and the
//! conformance suite's own completeness.

mod cli;
mod doc_examples;
mod docs;
mod families;
mod kubernetes;
mod omb_driver_files;
mod refusals;
mod registry;
