//! The integration tests of tint-cgt, in one test target, `all` (issue 63: each file directly under
//! `tests/` is a test binary of its own that links all of burn; one binary links it once). Each
//! former `tests/<name>.rs` is the module `<name>` here, its tests `<name>::<test>`: run one file's
//! tests with `cargo test -p tint-cgt --test all <name>::`.

// Helpers shared by several modules.
mod common;
mod data_parallel_setup;

mod checkpoint_crash;
mod data_parallel;
mod icl_metrics;
mod model;
// Several nodes need the network of the `nodes` feature (CI runs them with it); without it, a
// several-node run is refused by name.
#[cfg(feature = "nodes")]
mod multinode;
#[cfg(not(feature = "nodes"))]
mod no_network;
mod probe;
