//! One step of the LLaMA functional reference (every layer, TinT's default updates: W_V, W_O and
//! the MLP) on a `[1, T]` sequence whose first half trains: its descent direction, then the
//! updated model in a copy of the auxiliary one (what `eval icl`'s `tint-ref` does), timed, with
//! the estimate of `ReferenceStepMemory`. Run under `/usr/bin/time -v` for the peak memory
//! (docs/performance.md, "Memory of the TinT reference's step").
//!
//! ```sh
//! cargo build -p tint-sim --example reference_memory
//! target/debug/examples/reference_memory MODEL T
//! ```
//!
//! `MODEL` is a LLaMA-family checkpoint directory or `.gguf` file (e.g. the cached
//! SmolLM2-135M-Instruct, Q4_1 GGUF, dequantised to float32 on load). The token ids are a fixed
//! pattern inside the vocabulary: the memory and time of a step do not depend on them.
#![allow(clippy::print_stdout)] // the example reports on the terminal

use std::path::PathBuf;
use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::load_model;
use tint_sim::llama::{LlamaReference, LlamaTintConfig};
use tint_sim::{SimInput, StepConfig, StepDirection};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: reference_memory MODEL T";
    let mut args = std::env::args().skip(1);
    let model_path = PathBuf::from(args.next().ok_or(usage)?);
    let length: usize = args.next().ok_or(usage)?.parse()?;

    let device = Default::default();
    let model = load_model::<Flex>(&model_path, &device)?;
    let config = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: None,
            inner_lr: 1e-4,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let reference = LlamaReference::new(&model, config)?;
    let vocab = model.vocab_size() as i64;
    let ids: Vec<i64> = (0..length as i64)
        .map(|i| (i * 7919 + 13) % vocab)
        .collect();
    let input_ids = Tensor::<Flex, 2, Int>::from_data(TensorData::new(ids, [1, length]), &device);
    let input = SimInput::with_train_lengths(input_ids, &[length / 2])?;
    let estimate = reference.step_memory(&[length]);
    let start = Instant::now();
    let direction = reference.direction(std::slice::from_ref(&input))?;
    let updated = StepDirection::updated(&direction, 1e-4);
    let aux = updated.to_aux(&model).transpose()?;
    println!(
        "{} T={length}: direction and updated model ({}) in {:.1} s; estimate {:.3} GB \
         ({estimate:?})",
        model_path.display(),
        if aux.is_some() {
            "with its auxiliary copy"
        } else {
            "no auxiliary copy"
        },
        start.elapsed().as_secs_f64(),
        estimate.total() as f64 / 1e9
    );
    Ok(())
}
