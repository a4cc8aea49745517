//! One dynamic-evaluation gradient (every parameter, mean loss over every token) of a model on a
//! `[1, T]` sequence, with the backward block by block ([`GradientMemory::Least`]) or over the
//! whole graph ([`GradientMemory::WholeGraph`]), timed; run each under `/usr/bin/time -v` for its
//! peak memory (docs/performance.md, "Dynamic evaluation's backward block by block").
//!
//! ```sh
//! cargo build --workspace --example backward_memory
//! target/debug/examples/backward_memory MODEL T least|whole
//! ```
//!
//! `MODEL` is a checkpoint directory or a `.gguf` file (e.g. the cached SmolLM2-135M-Instruct,
//! Q4_1 GGUF, dequantised to float32 on load). The token ids are a fixed pattern inside the
//! vocabulary: the memory and time of a backward do not depend on the ids.
#![allow(clippy::print_stdout)] // the example reports on the terminal

use std::path::PathBuf;
use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{load_model, sgd_gradient, AuxModel, DynEvalConfig, GradientMemory};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: backward_memory MODEL T least|whole";
    let mut args = std::env::args().skip(1);
    let model_path = PathBuf::from(args.next().ok_or(usage)?);
    let length: usize = args.next().ok_or(usage)?.parse()?;
    let memory = match args.next().as_deref() {
        Some("least") => GradientMemory::Least,
        Some("whole") => GradientMemory::WholeGraph,
        other => return Err(format!("{usage}; got {other:?}").into()),
    };

    let device = Default::default();
    let model: AuxModel<Autodiff<Flex>> = load_model(&model_path, &device)?;
    let vocab = model.vocab_size() as i64;
    let ids: Vec<i64> = (0..length as i64)
        .map(|i| (i * 7919 + 13) % vocab)
        .collect();
    let input =
        Tensor::<Autodiff<Flex>, 2, Int>::from_data(TensorData::new(ids, [1, length]), &device);
    let config = DynEvalConfig {
        memory,
        ..Default::default()
    };
    let start = Instant::now();
    let gradient = sgd_gradient(&model, input, &config)?;
    println!(
        "{} T={length} {memory:?}: loss {:.4}, {:.1} s",
        model_path.display(),
        gradient.step(0.0)?.losses[0],
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
