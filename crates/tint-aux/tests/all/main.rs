//! The integration tests of tint-aux, in one test target, `all` (issue 63: each file directly under
//! `tests/` is a test binary of its own that links all of burn; one binary links it once). Each
//! former `tests/<name>.rs` is the module `<name>` here, its tests `<name>::<test>`: run one file's
//! tests with `cargo test -p tint-aux --test all <name>::`.

// Helpers shared by several modules.
mod common;

mod bad_input;
mod branches;
mod dyn_eval;
mod gguf_properties;
mod gguf_reader;
mod hostile_inputs;
mod ids_properties;
mod llama_smollm2;
mod llama_tiny;
mod mutation_suite;
mod parity;
mod safetensors_properties;
mod trace;
mod weight_names;
