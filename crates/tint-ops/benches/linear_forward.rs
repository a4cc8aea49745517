//! Criterion bench: LinearForward (docs/construction.md §6.1) on the Flex CPU backend, GPT-2 shape
//! (D = 768, P = 256, Ds = 3072, T = 64) and a tiny shape, evaluated through the structure of the
//! constructed weights (`structured`, [`Execution::Structured`]) and as the stored linear attention
//! (`attention`, [`Execution::Constructed`], the default).

use burn::{
    backend::Flex,
    tensor::{Distribution, Tensor},
};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tint_ops::{prefix, Execution, LinearForward, SimContext, TintDims, TintOptions};

type B = Flex;

fn bench_linear_forward(c: &mut Criterion) {
    let device = Default::default();
    let mut group = c.benchmark_group("flex/linear_forward");
    group.sample_size(10);
    // (name, D, H, Ds, P, Hs, Tmax, T)
    let shapes = [
        ("tiny", 8, 2, 32, 4, 4, 16, 8),
        ("gpt2", 768, 12, 3072, 256, 12, 1024, 64),
    ];
    for (name, d, h, ds, p, hs, tmax, t) in shapes {
        let dims = TintDims::new(d, h, ds, p, hs, tmax, t).expect("valid bench shape");
        let options = TintOptions::default();
        let mut module =
            LinearForward::<B>::new(&dims, Some(dims.linear_memory_index()), &options, &device)
                .expect("constructible");
        let ctx = SimContext::new(&dims, Tensor::<B, 2>::ones([1, t], &device), &device)
            .expect("context");
        let weight = Tensor::<B, 3>::random([1, d, d], Distribution::Normal(0.0, 0.02), &device);
        let bias = Tensor::<B, 2>::random([1, d], Distribution::Normal(0.0, 0.02), &device);
        let prefix_rows = prefix::write_linear(weight, bias, &dims).expect("prefix");
        let tokens = Tensor::<B, 3>::random([1, t, ds], Distribution::Normal(0.0, 1.0), &device);
        let state = Tensor::cat(vec![prefix_rows, tokens], 1);
        for (execution, path) in [
            (Execution::Structured, "structured"),
            (Execution::Constructed, "attention"),
        ] {
            module.execution = execution;
            group.bench_with_input(BenchmarkId::new(path, name), &state, |bencher, state| {
                bencher.iter(|| {
                    let out = module.forward(black_box(state.clone()), &ctx);
                    // Force the computation (and the device sync) inside the timed region.
                    black_box(out.into_data())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_linear_forward);
criterion_main!(benches);
