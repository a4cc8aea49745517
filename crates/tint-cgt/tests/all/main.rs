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
mod multinode;
mod probe;
