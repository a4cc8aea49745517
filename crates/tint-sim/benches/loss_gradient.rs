//! The `Prediction` loss gradient at SmolLM2-135M's sizes (vocabulary 49152, D = 576, T = 256,
//! batch 1, Flex), in the cancellation-free form `tint_sim::loss` evaluates against the literal
//! `softmax(logits) E − E[y]` it replaced (docs/construction.md §7): the cost of the rewrite. Both
//! start from given logits, as the reference and the executions do.
//!
//! Run: `cargo bench -p tint-sim --bench loss_gradient`.

use std::hint::black_box;

use burn::tensor::activation::softmax;
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use criterion::{criterion_group, criterion_main, Criterion};
use tint_sim::loss::loss_gradient_with_logits;
use tint_sim::LossGradientKind;

type Backend = burn::backend::Flex;

const VOCAB_SIZE: usize = 49152;
const D_MODEL: usize = 576;
const SEQ_LENGTH: usize = 256;

fn bench_loss_gradient(c: &mut Criterion) {
    let device = Default::default();
    let embedding = Tensor::<Backend, 2>::random(
        [VOCAB_SIZE, D_MODEL],
        Distribution::Normal(0.0, 0.05),
        &device,
    );
    let hf = Tensor::<Backend, 3>::random(
        [1, SEQ_LENGTH, D_MODEL],
        Distribution::Normal(0.0, 1.0),
        &device,
    );
    let logits = hf
        .clone()
        .matmul(embedding.clone().unsqueeze_dim::<3>(0).swap_dims(1, 2));
    let ids: Vec<i64> = (0..SEQ_LENGTH as i64)
        .map(|i| (i * 7919 + 13) % VOCAB_SIZE as i64)
        .collect();
    let ids = Tensor::<Backend, 2, Int>::from_data(TensorData::new(ids, [1, SEQ_LENGTH]), &device);
    let next_target = Tensor::<Backend, 3>::ones([1, SEQ_LENGTH, 1], &device);

    let mut group = c.benchmark_group("flex/loss_gradient_smollm2");
    group.sample_size(10);
    group.bench_function("cancellation_free", |b| {
        b.iter(|| {
            let g = loss_gradient_with_logits(
                hf.clone(),
                Some(logits.clone()),
                &embedding,
                &ids,
                &next_target,
                LossGradientKind::Prediction,
            );
            black_box(g.into_data())
        })
    });
    // The literal form, for comparison only (target rows of the next tokens; the last row has none).
    let next_ids = ids
        .clone()
        .slice([0..1, 1..SEQ_LENGTH])
        .reshape([SEQ_LENGTH - 1]);
    let target = Tensor::cat(
        vec![
            embedding.clone().select(0, next_ids).unsqueeze_dim::<3>(0),
            Tensor::zeros([1, 1, D_MODEL], &device),
        ],
        1,
    );
    group.bench_function("literal", |b| {
        b.iter(|| {
            let g = softmax(logits.clone(), 2).matmul(embedding.clone().unsqueeze_dim::<3>(0))
                - target.clone();
            black_box(g.into_data())
        })
    });
    group.finish();
}

criterion_group!(benches, bench_loss_gradient);
criterion_main!(benches);
