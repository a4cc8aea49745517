//! One step of the LLaMA simulator on seeded random weights, for profiling (docs/performance.md,
//! "Changes of 2026-11-25").
//!
//! ```text
//! cargo run -p tint-sim --example perf_llama_step -- <constructed|structured|ref> <batch_size> <T> <layers> [repeats]
//! ```
//!
//! A SmolLM2-like shape, smaller: `D = 192`, 3 query heads and 1 KV head of size 64 (SmolLM2:
//! 9 / 3), `d_ff = 512` (2.67 D, padded to 3 chunks as SmolLM2's 1536 = 2.67 · 576), vocabulary
//! 1024, tied head; TinT sizes of [`LlamaSimulatorConfig::for_model`] (`Ds = 5 D`, `P = D / 4`).
//! The top `min(2, layers)` layers are simulated (as `cargo xtask eval` on SmolLM2), one step,
//! the first `T / 2` tokens train. `constructed` / `structured`: [`LlamaSimulator::forward`] with
//! that execution; `ref`: [`LlamaReference::forward`]. One warm-up run, then per timed run
//! `step_seconds <wall> mean_final_loss <loss>`.
#![allow(clippy::print_stdout)] // the timings are the output

use std::time::Instant;
use tint_sim::StepConfig;

use burn::tensor::{Distribution, Int, Tensor, TensorData};
use tint_sim::llama::{
    LlamaLayerParams, LlamaParams, LlamaReference, LlamaSimulator, LlamaSimulatorConfig,
    LlamaTintConfig,
};
use tint_sim::{Execution, SimInput};

type Backend = burn::backend::Flex;

const D: usize = 192;
const N_HEADS: usize = 3;
const N_KV_HEADS: usize = 1;
const HEAD_DIM: usize = 64;
const D_FF: usize = 512;
const VOCAB_SIZE: usize = 1024;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg =
        |k: usize, default: usize| args.get(k).and_then(|s| s.parse().ok()).unwrap_or(default);
    let which = args.get(1).cloned().unwrap_or_else(|| "constructed".into());
    let (batch_size, seq_length, n_layers, repeats) = (arg(2, 1), arg(3, 64), arg(4, 2), arg(5, 0));
    let device = Default::default();
    <Backend as burn::tensor::backend::Backend>::seed(&device, 0);
    let normal =
        |shape: [usize; 2]| Tensor::random(shape, Distribution::Normal(0.0, 0.05), &device);
    let gain = || Tensor::random([D], Distribution::Uniform(0.8, 1.2), &device);
    let params = LlamaParams::<Backend> {
        embedding: normal([VOCAB_SIZE, D]),
        layers: (0..n_layers)
            .map(|_| LlamaLayerParams {
                attn_norm: gain(),
                w_q: normal([D, N_HEADS * HEAD_DIM]),
                w_k: normal([D, N_KV_HEADS * HEAD_DIM]),
                w_v: normal([D, N_KV_HEADS * HEAD_DIM]),
                w_o: normal([N_HEADS * HEAD_DIM, D]),
                mlp_norm: gain(),
                w_gate: normal([D, D_FF]),
                w_up: normal([D, D_FF]),
                w_down: normal([D_FF, D]),
            })
            .collect(),
        final_norm: gain(),
        lm_head: None,
        n_heads: N_HEADS,
        n_kv_heads: N_KV_HEADS,
        head_dim: HEAD_DIM,
        rms_eps: 1e-5,
        rope_theta: 10_000.0,
        max_positions: 1024,
    };
    let step = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(n_layers.min(2)),
            inner_lr: 1e-3,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let ids: Vec<i64> = (0..(batch_size * seq_length) as i64)
        .map(|i| (i * 7919 + 13) % VOCAB_SIZE as i64)
        .collect();
    let ids: Tensor<Backend, 2, Int> =
        Tensor::from_data(TensorData::new(ids, [batch_size, seq_length]), &device);
    let input = SimInput::with_train_lengths(ids, &vec![seq_length / 2; batch_size])
        .expect("valid train lengths");
    let run: Box<dyn Fn() -> f64> = match which.as_str() {
        "constructed" | "structured" => {
            let execution = if which == "constructed" {
                Execution::Constructed
            } else {
                Execution::Structured
            };
            let config = LlamaSimulatorConfig {
                execution,
                ..LlamaSimulatorConfig::for_model(D, N_HEADS, step)
            };
            let sim = LlamaSimulator::from_params(params, config).expect("valid config");
            Box::new(move || sim.forward(&input).expect("runs").final_loss.mean())
        }
        "ref" => {
            let reference = LlamaReference::from_params(params, step).expect("valid config");
            Box::new(move || reference.forward(&input).expect("runs").final_loss.mean())
        }
        other => panic!("unknown mode {other}: constructed, structured or ref"),
    };
    for _ in 0..=repeats {
        let start = Instant::now();
        let loss = run();
        println!(
            "step_seconds {:.3} mean_final_loss {loss:.17}",
            start.elapsed().as_secs_f64()
        );
    }
}
