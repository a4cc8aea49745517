//! Times one simulated TinT step (simulator or functional reference) on the tiny GPT-2 of issue #9
//! (D = 128, 4 layers, 4 heads, vocabulary 4096, T = 256, Ds = 640, P = 32, Hs = 20), Flex backend.
//!
//! Run: `cargo run -p tint-sim --example perf_step -- <sim|ref> <batch_size> <repeats>`; prints one
//! `step_seconds <value>` line per timed step after one warm-up step.

use std::time::Instant;

use burn::tensor::{Int, Tensor, TensorData};
use tint_sim::{
    Activation, AuxDims, AuxParams, FunctionalReference, SimInput, TintConfig, TintSimulator,
};

type Backend = burn::backend::Flex;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("sim");
    let batch_size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let repeats: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let device = Default::default();
    <Backend as burn::tensor::backend::Backend>::seed(&device, 0);
    let dims = AuxDims {
        d_model: 128,
        n_heads: 4,
        n_layers: 4,
        d_inner: 512,
        vocab_size: 4096,
        n_positions: 256,
    };
    let aux = AuxParams::<Backend>::random(dims, Activation::GeluNew, &device);
    let config = TintConfig {
        inner_lr: 1e-3,
        restrict_prefixes: true,
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        ..TintConfig::for_model(128, 32, 32)
    };
    let seq_length = 256;
    let ids: Vec<i64> = (0..(batch_size * seq_length) as i64)
        .map(|i| (i * 7919 + 13) % dims.vocab_size as i64)
        .collect();
    let ids = Tensor::<Backend, 2, Int>::from_data(
        TensorData::new(ids, [batch_size, seq_length]),
        &device,
    );
    let input = SimInput::with_train_lengths(ids, &vec![seq_length / 2; batch_size])
        .expect("valid train lengths");
    let step: Box<dyn Fn() -> f32> = match which {
        "sim" => {
            let sim = TintSimulator::new(&aux, config).expect("valid config");
            Box::new(move || {
                let out = sim.forward(&input).expect("runs");
                out.final_logits.into_data().to_vec::<f32>().expect("f32")[0]
            })
        }
        _ => {
            let reference = FunctionalReference::new(aux, config).expect("valid config");
            Box::new(move || {
                let out = reference.forward(&input).expect("runs");
                out.final_logits.into_data().to_vec::<f32>().expect("f32")[0]
            })
        }
    };
    for rep in 0..=repeats {
        let start = Instant::now();
        let cpu_start = cpu_seconds();
        let first = step();
        let seconds = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu_start;
        if rep > 0 {
            println!("step_seconds {seconds:.4} cpu_seconds {cpu:.2}");
        } else {
            eprintln!("warm-up {seconds:.4} s (logit[0] = {first})");
        }
    }
}

/// User + system CPU time of this process (Linux `/proc/self/stat`, 100 Hz ticks; 0 elsewhere):
/// on a shared machine it is less disturbed by other jobs than wall time.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 (utime) and 15 (stime), counted from 1 with the pid and name as fields 1 and 2.
    (ticks(11) + ticks(12)) / 100.0
}
