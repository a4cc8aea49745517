//! Times one plain forward of the tiny GPT-2 of issue 17 (D = 128, 4 layers, 4 heads, vocabulary 4096,
//! T = 256; seeded random weights), Flex backend, f32: the "auxiliary forward" row of
//! `cargo xtask bench`, without the child process, for profiling.
//!
//! ```text
//! cargo bench -p tint-aux --bench forward -- [batch_size] [repeats] [traced|logits]
//! perf record -g target/release/deps/forward-* 1 200     # or the dev-profile binary
//! ```
//!
//! `logits` (default) times [`AuxModel::forward`] and reads the logits back; `traced` times
//! [`AuxModel::forward_traced`] (what the TinT simulator and reference read). One warm-up run, then
//! one line `forward_seconds <wall>` per timed run and the minimum.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::time::Instant;

use burn::tensor::{Distribution, Int, Tensor, TensorData};
use tint_aux::attention::CausalSelfAttention;
use tint_aux::block::DecoderBlock;
use tint_aux::config::Gpt2Config;
use tint_aux::gpt2::Gpt2;
use tint_aux::layer_norm::LayerNorm;
use tint_aux::{linear, AuxModel};

type B = burn::backend::Flex;

const D: usize = 128;
const LAYERS: usize = 4;
const HEADS: usize = 4;
const VOCAB: usize = 4096;
const T: usize = 256;

fn normal<const N: usize>(shape: [usize; N], mean: f64, std: f64) -> Tensor<B, N> {
    Tensor::random(shape, Distribution::Normal(mean, std), &Default::default())
}

fn layer_norm() -> LayerNorm<B> {
    LayerNorm::new(normal([D], 1.0, 0.1), normal([D], 0.0, 0.02), 1e-5)
}

fn tiny_gpt2() -> AuxModel<B> {
    let lin = |i: usize, o: usize| linear(normal([i, o], 0.0, 0.02), Some(normal([o], 0.0, 0.02)));
    let blocks = (0..LAYERS)
        .map(|_| DecoderBlock {
            ln1: layer_norm(),
            attn: CausalSelfAttention::multi_head(
                lin(D, D),
                lin(D, D),
                lin(D, D),
                lin(D, D),
                HEADS,
            ),
            ln2: layer_norm(),
            fc: lin(D, 4 * D),
            proj: lin(4 * D, D),
        })
        .collect();
    let config: Gpt2Config = serde_json::from_value(serde_json::json!({
        "n_embd": D, "n_layer": LAYERS, "n_head": HEADS, "n_positions": T, "vocab_size": VOCAB,
    }))
    .expect("a valid GPT-2 config");
    AuxModel::Gpt2(Gpt2 {
        wte: burn::module::Param::from_tensor(normal([VOCAB, D], 0.0, 0.02)),
        wpe: burn::module::Param::from_tensor(normal([T, D], 0.0, 0.01)),
        blocks,
        ln_f: layer_norm(),
        config,
        weight_file: Default::default(),
    })
}

fn main() {
    // `cargo bench` passes `--bench`; keep the positional arguments only.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let batch_size: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(1);
    let repeats: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let traced = args.get(2).is_some_and(|s| s == "traced");
    let device = Default::default();
    <B as burn::tensor::backend::Backend>::seed(&device, 0);
    let model = tiny_gpt2();
    let ids: Vec<i64> = (0..(batch_size * T) as i64)
        .map(|i| (i * 7919 + 13) % VOCAB as i64)
        .collect();
    let ids = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [batch_size, T]), &device);
    let mut best = f64::INFINITY;
    for run in 0..=repeats {
        let start = Instant::now();
        let value = if traced {
            let trace = model.forward_traced(ids.clone()).expect("valid ids");
            let last = trace.layers.last().expect("layers").block_output.clone();
            last.sum().into_scalar() + trace.logits.sum().into_scalar()
        } else {
            // One logit read back: flex computes eagerly; on a GPU the read waits for the device.
            let logits = model.forward(ids.clone()).expect("valid ids");
            logits.slice([0..1, 0..1, 0..1]).into_scalar()
        };
        let wall = start.elapsed().as_secs_f64();
        assert!(value.is_finite(), "non-finite forward output {value}");
        if run > 0 {
            println!("forward_seconds {wall:.5}");
            best = best.min(wall);
        }
    }
    println!("min_forward_seconds {best:.5} (B = {batch_size}, T = {T}, traced = {traced})");
}
