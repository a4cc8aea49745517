//! Times one simulated TinT step on the tiny GPT-2 of issue #9 (D = 128, 4 layers, 4 heads,
//! vocabulary 4096, T = 256 with the first 128 tokens for training; TinT Ds = 640, P = 32, Hs = 20,
//! all layers, one step), Flex backend, and the three baselines it is compared with.
//!
//! ```text
//! python3 scripts/make_bench_gpt2_tiny.py /tmp/gpt2-tiny-bench      # seeded random checkpoint
//! cargo run -p tint-bench --example perf_step -- <sim|structured|ref|dyn|aux> <batch_size> <repeats> [model_dir]
//! ```
//!
//! `sim`: [`TintSimulator::forward`] with the constructed execution (the default,
//! docs/construction.md §15); `structured`: the same with [`Execution::Structured`]; `ref`: [`FunctionalReference::forward`]; `dyn`: dynamic
//! evaluation (one SGD step on the 128 training tokens, then the NLL of the rest, burn autodiff);
//! `aux`: one plain forward of the auxiliary model; `sgemm`: a 1024³ f32 matmul (prints GFLOP/s). Without `model_dir` (sim / structured / ref only) a seeded
//! [`AuxParams::random`] model is used. One warm-up run, then one line
//! `step_seconds <wall> cpu_seconds <user+sys>` per timed run (the step only: no loading or
//! construction).
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::Path;
use std::time::Instant;

use burn::backend::Autodiff;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{dynamic_eval, load_model, AuxModel, DynEvalConfig};
use tint_bench::checkpoint::token_ids;
use tint_bench::config::INNER_LR;
use tint_bench::measure::cpu_seconds;
use tint_bench::BenchConfig;
use tint_sim::{Activation, AuxParams, Execution, FunctionalReference, SimInput, TintSimulator};

type Backend = burn::backend::Flex;
type AdBackend = Autodiff<Backend>;

/// The sizes `cargo xtask bench` times.
const TINY: BenchConfig = BenchConfig::TINY;

/// The bench's token ids: `batch_size` sequences of `TINY.seq_length`.
fn ids<B: burn::tensor::backend::Backend>(batch_size: usize) -> Tensor<B, 2, Int> {
    let ids = token_ids(TINY.vocab_size, batch_size, TINY.seq_length);
    Tensor::from_data(
        TensorData::new(ids, [batch_size, TINY.seq_length]),
        &Default::default(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("sim").to_string();
    let batch_size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let repeats: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let model_dir = args.get(4).map(Path::new);
    let device = Default::default();
    <Backend as burn::tensor::backend::Backend>::seed(&device, 0);
    let aux = match model_dir {
        Some(dir) => {
            let model: AuxModel<Backend> = load_model(dir, &device).expect("loads the model");
            AuxParams::from_aux(&model).expect("GPT-2 weights")
        }
        None => AuxParams::<Backend>::random(TINY.aux_dims(), Activation::GeluNew, &device),
    };
    let input = SimInput::with_train_lengths(ids(batch_size), &vec![TINY.train_length; batch_size])
        .expect("valid train lengths");
    let step: Box<dyn Fn() -> f64> = match which.as_str() {
        "sim" | "structured" => {
            let execution = if which == "sim" {
                Execution::Constructed
            } else {
                Execution::Structured
            };
            let sim =
                TintSimulator::new(&aux, TINY.tint_config(execution, None)).expect("valid config");
            Box::new(move || sim.forward(&input).expect("runs").final_loss.mean())
        }
        "ref" => {
            let config = TINY.tint_config(Execution::Constructed, None);
            let reference = FunctionalReference::new(aux, config).expect("valid config");
            Box::new(move || reference.forward(&input).expect("runs").final_loss.mean())
        }
        "aux" => {
            let model: AuxModel<Backend> =
                load_model(model_dir.expect("aux needs model_dir"), &device).expect("loads");
            let ids = ids::<Backend>(batch_size);
            Box::new(move || {
                let logits = model.forward(ids.clone()).expect("runs");
                logits.into_data().to_vec::<f32>().expect("f32")[0] as f64
            })
        }
        "dyn" => {
            let model: AuxModel<AdBackend> =
                load_model(model_dir.expect("dyn needs model_dir"), &device).expect("loads");
            let ids = ids::<AdBackend>(batch_size);
            let dyn_config = DynEvalConfig {
                lr: INNER_LR,
                ..Default::default()
            };
            Box::new(move || {
                let outcome = dynamic_eval(&model, ids.clone(), TINY.train_length, &dyn_config)
                    .expect("runs");
                outcome.train_losses[0]
            })
        }
        "sgemm" => {
            // The machine's f32 matmul rate through burn Flex: [n, n] x [n, n], 2 n^3 FLOP.
            let n = 1024;
            let a = Tensor::<Backend, 2>::random(
                [n, n],
                burn::tensor::Distribution::Normal(0.0, 1.0),
                &device,
            );
            let b = a.clone().transpose();
            Box::new(move || {
                let start = Instant::now();
                let c = a.clone().matmul(b.clone());
                let first = c.into_data().to_vec::<f32>().expect("f32")[0] as f64;
                let seconds = start.elapsed().as_secs_f64();
                println!(
                    "sgemm_gflops {:.2}",
                    2.0 * (n as f64).powi(3) / seconds / 1e9
                );
                first
            })
        }
        other => panic!("unknown mode {other}: sim, structured, ref, dyn, aux or sgemm"),
    };
    for rep in 0..=repeats {
        let start = Instant::now();
        let cpu_start = cpu_seconds();
        let value = step();
        let seconds = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu_start;
        if rep > 0 {
            println!("step_seconds {seconds:.4} cpu_seconds {cpu:.2}");
        } else {
            eprintln!("warm-up {seconds:.4} s (value {value})");
        }
    }
}
