//! The integration tests of tint-ops, in one test target, `all` (issue 63: each file directly under
//! `tests/` is a test binary of its own that links all of burn; one binary links it once). Each
//! former `tests/<name>.rs` is the module `<name>` here, its tests `<name>::<test>`: run one file's
//! tests with `cargo test -p tint-ops --test all <name>::`.

// Helpers shared by several modules.
mod common;

mod attention_math;
mod flex_exp;
mod flex_mends;
mod prefix_layout;
mod theorem_c2;
mod validation_errors;
