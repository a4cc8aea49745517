//! The cost of one CGT training step on the CPU (flex), at the `icl-small` preset with the tables'
//! batch of 64 (docs/cgt.md, "Presets"), and of its per-position operator `T^kappa(x; y)`.
//!
//! - `cgt_step/<variant>`: the joint loss of one batch, its backward pass and the Adam step, as
//!   `tint_cgt::train` runs them, for the four Table 1 variants;
//! - `template_per_position`: forward and backward of one generated operator applied with a
//!   different `y` at every position (the `[64, n, 48]` stream above the readout layer), the
//!   operation the guided layers add to a baseline step.
//!
//! Run: `cargo bench -p tint-cgt --bench train_step`. Set
//! `RAYON_NUM_THREADS=1` to time one core, as the background table runs do.

use burn::backend::{Autodiff, Flex};
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::{Distribution, Tensor};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tint_cgt::data::BatchSource;
use tint_cgt::objective::joint_loss;
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
use tint_cgt::template::TemplateGenerator;
use tint_cgt::train::optimizer_config;
use tint_cgt::CgtModel;

type Train = Autodiff<Flex>;

/// The tables' batch size (experiments/cgt-icl-small/README.md, "`icl-small` Table 1 at 7000 steps").
const BATCH_SIZE: usize = 64;

fn preset() -> ExperimentPreset {
    let mut preset = ExperimentPreset::by_name("icl-small").expect("icl-small is a preset");
    preset.data.set_batch_size(BATCH_SIZE);
    preset
}

fn cgt_step(c: &mut Criterion) {
    let preset = preset();
    let DataPreset::Arithmetic(data) = &preset.data else {
        panic!("icl-small is an arithmetic preset");
    };
    let device = Default::default();
    let batch = data.batch(0);
    let mut group = c.benchmark_group("cgt_step");
    group.sample_size(10);
    for variant in Variant::TABLE_1 {
        let training = preset.training_for(variant);
        let model = CgtModel::<Train>::new(&preset.model_for(variant), &device)
            .expect("the preset's model is valid");
        let mut optimizer = optimizer_config(&training).init::<Train, CgtModel<Train>>();
        let mut model = Some(model);
        group.bench_function(variant.slug(), |b| {
            b.iter(|| {
                let current = model.take().expect("the model is put back after each step");
                let mut rng = StdRng::seed_from_u64(7);
                let (loss, _) =
                    joint_loss(&current, &batch, &training.objective, &mut rng, &device)
                        .expect("the step's loss");
                let grads = GradientsParams::from_grads(loss.backward(), &current);
                model = Some(optimizer.step(1e-4, current, grads));
            })
        });
    }
    group.finish();
}

fn template_per_position(c: &mut Criterion) {
    let preset = preset();
    let config = &preset.model;
    let DataPreset::Arithmetic(data) = &preset.data else {
        panic!("icl-small is an arithmetic preset");
    };
    let seq_length = data.sequence_length();
    let device = Default::default();
    let generator = TemplateGenerator::<Train>::for_config(config, &device);
    let normal = Distribution::Normal(0.0, 1.0);
    let input = Tensor::<Flex, 3>::random([BATCH_SIZE, seq_length, config.d_x], normal, &device);
    let context = Tensor::<Flex, 3>::random([BATCH_SIZE, seq_length, config.d_y], normal, &device);
    c.bench_function("template_per_position", |b| {
        b.iter_batched(
            || {
                (
                    Tensor::<Train, 3>::from_inner(input.clone()).require_grad(),
                    Tensor::<Train, 3>::from_inner(context.clone()).require_grad(),
                )
            },
            |(input, context)| generator.forward(input, context).sum().backward(),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, cgt_step, template_per_position);
criterion_main!(benches);
