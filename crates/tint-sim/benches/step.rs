//! One simulated TinT step (first forward, loss gradient, backward + descent, final forward) for the
//! constructed simulator and the functional reference, on the micro GPT-2 (D = 32, 2 layers, T = 64,
//! Ds = 160, P = 8, Hs = 20) and a tiny random GPT-2 (D = 128, 4 layers, 4 heads, vocabulary 4096,
//! T = 256, Ds = 640, P = 32, Hs = 20), batch 1, Flex (CPU) backend.
//!
//! Run: `cargo bench -p tint-sim --bench step`.

use std::hint::black_box;
use tint_sim::StepConfig;

use burn::tensor::{Int, Tensor, TensorData};
use criterion::{criterion_group, criterion_main, Criterion};
use tint_sim::{
    Activation, AuxDims, AuxParams, FunctionalReference, SimInput, TintConfig, TintSimulator,
};

type Backend = burn::backend::Flex;

struct Case {
    name: &'static str,
    aux: AuxParams<Backend>,
    config: TintConfig,
    seq_length: usize,
}

fn cases() -> Vec<Case> {
    let device = Default::default();
    let micro = AuxDims {
        d_model: 32,
        n_heads: 4,
        n_layers: 2,
        d_inner: 128,
        vocab_size: 4096,
        n_positions: 64,
    };
    let tiny = AuxDims {
        d_model: 128,
        n_heads: 4,
        n_layers: 4,
        d_inner: 512,
        vocab_size: 4096,
        n_positions: 256,
    };
    let config = |d, p, head| TintConfig {
        step: StepConfig {
            inner_lr: 1e-3,
            ..StepConfig::default()
        },
        restrict_prefixes: true,
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        ..TintConfig::for_model(d, p, head)
    };
    vec![
        Case {
            name: "micro",
            aux: AuxParams::random(micro, Activation::GeluNew, &device),
            config: config(32, 8, 8),
            seq_length: 64,
        },
        Case {
            name: "tiny",
            aux: AuxParams::random(tiny, Activation::GeluNew, &device),
            config: config(128, 32, 32),
            seq_length: 256,
        },
    ]
}

fn input(seq_length: usize, vocab_size: usize) -> SimInput<Backend> {
    let device = Default::default();
    let ids: Vec<i64> = (0..seq_length as i64)
        .map(|i| (i * 7919 + 13) % vocab_size as i64)
        .collect();
    let ids = Tensor::<Backend, 2, Int>::from_data(TensorData::new(ids, [1, seq_length]), &device);
    SimInput::with_train_lengths(ids, &[seq_length / 2]).expect("valid train length")
}

fn bench_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("flex/one_step");
    group.sample_size(10);
    for case in cases() {
        let x = input(case.seq_length, case.aux.dims().vocab_size);
        let sim = TintSimulator::new(&case.aux, case.config.clone()).expect("valid config");
        let reference =
            FunctionalReference::new(case.aux.clone(), case.config.clone()).expect("valid config");
        group.bench_function(format!("simulator/{}", case.name), |b| {
            b.iter(|| {
                black_box(
                    sim.forward(black_box(&x))
                        .expect("runs")
                        .final_logits
                        .into_data(),
                )
            })
        });
        group.bench_function(format!("reference/{}", case.name), |b| {
            b.iter(|| {
                black_box(
                    reference
                        .forward(black_box(&x))
                        .expect("runs")
                        .final_logits
                        .into_data(),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_step);
criterion_main!(benches);
