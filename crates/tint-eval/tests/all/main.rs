//! The integration tests of tint-eval, in one test target, `all` (issue 63: each file directly under
//! `tests/` is a test binary of its own that links all of burn; one binary links it once). Each
//! former `tests/<name>.rs` is the module `<name>` here, its tests `<name>::<test>`: run one file's
//! tests with `cargo test -p tint-eval --test all <name>::`.

mod committed_intervals;
mod icl_end_to_end;
mod icl_train_once;
mod icl_units;
mod logits;
mod methods;
mod non_finite;
mod resume_and_tuning;
