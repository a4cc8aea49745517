//! The integration tests of tint-sim, in one test target, `all` (issue 63: each file directly under
//! `tests/` is a test binary of its own that links all of burn; one binary links it once). Each
//! former `tests/<name>.rs` is the module `<name>` here, its tests `<name>::<test>`: run one file's
//! tests with `cargo test -p tint-sim --test all <name>::`.

// Helpers shared by several modules.
mod common;

mod branches;
mod construction;
mod executions;
mod f32_numerics;
mod llama_attention_half;
mod llama_mlp_block;
mod llama_param_count;
mod llama_reference;
mod llama_simulator;
mod llama_smollm2;
mod loss_gradient;
mod opt_post_ln;
mod param_count;
mod query_independence;
mod reference_golden;
mod simulator;
mod updated_model;
