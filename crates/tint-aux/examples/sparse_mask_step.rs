//! The block-by-block step on a sparse loss mask against the whole graph's, on a real model:
//! padded rows of different lengths, one label target per row (as `eval icl`'s Single format,
//! label-only loss), one SGD step at `LR` with each, then the two updated models' log-softmax on a
//! probe sequence, and how far the step moved it (docs/performance.md, "Table 1's training
//! steps").
//!
//! ```sh
//! cargo build -p tint-aux --example sparse_mask_step
//! target/debug/examples/sparse_mask_step MODEL LR labels|every
//! ```
//!
//! `LENGTHS=equal`: every row 40 tokens long (one piece); `pairs`: 40, 40, 12, 12; `one-short`:
//! 40, 40, 40, 12. `FORWARD_CHECK=1`: also each row's
//! logits run alone against its logits inside the batch. Every run also steps in float64 (every
//! parameter cast) as the ground truth of both float32 backwards.
#![allow(clippy::print_stdout)] // the example reports on the terminal

use std::path::PathBuf;

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::module::Param;
use burn::tensor::activation::log_softmax;
use burn::tensor::DType;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{
    load_model, sgd_update, AuxModel, DynEvalConfig, GradientMemory, LossMask, ParamInfo,
    ParamMapper,
};

/// Casts every parameter to float64 (the ground truth both float32 backwards are held to).
struct CastF64;

impl<B: burn::tensor::backend::Backend> ParamMapper<B> for CastF64 {
    fn map<const D: usize>(
        &mut self,
        _: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        param.map(|t| t.detach().cast(DType::F64).detach().require_grad())
    }
}

/// The largest `|a[i] − b[i]|`.
fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    run::<Flex>()
}

/// The comparison on backend `B`.
fn run<B: burn::tensor::backend::Backend>() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: sparse_mask_step MODEL LR labels|every";
    let mut args = std::env::args().skip(1);
    let model_path = PathBuf::from(args.next().ok_or(usage)?);
    let lr: f64 = args.next().ok_or(usage)?.parse()?;
    // `every`: every position of every row counted (the path that runs the batch as it is), for
    // the float32 agreement of the two backwards without pieces.
    let every = match args.next().as_deref() {
        Some("labels") => false,
        Some("every") => true,
        other => return Err(format!("{usage}; got {other:?}").into()),
    };
    let device = Default::default();
    let model: AuxModel<Autodiff<B>> = load_model(&model_path, &device)?;
    let vocab = model.vocab_size() as i64;
    // Four rows of 40 positions: real lengths 40, 23, 31, 12, one target at each row's end.
    let (rows, width) = (4usize, 40usize);
    let lengths: [usize; 4] = match std::env::var("LENGTHS").as_deref() {
        Ok("equal") => [40, 40, 40, 40],
        Ok("pairs") => [40, 40, 12, 12],
        Ok("one-short") => [40, 40, 40, 12],
        _ => [40, 23, 31, 12],
    };
    let ids: Vec<i64> = (0..(rows * width) as i64)
        .map(|i| (i * 7919 + 13) % vocab)
        .collect();
    let input =
        Tensor::<Autodiff<B>, 2, Int>::from_data(TensorData::new(ids, [rows, width]), &device);
    let targets: Vec<Vec<bool>> = lengths
        .iter()
        .map(|&l| {
            (0..width)
                .map(|t| if every { t > 0 } else { t == l - 1 })
                .collect()
        })
        .collect();
    let probe_ids: Vec<i64> = (0..32).map(|i| (i * 104_729 + 7) % vocab).collect();
    let probe = Tensor::<B, 2, Int>::from_data(TensorData::new(probe_ids, [1, 32]), &device);
    let log_probs = |m: &AuxModel<B>| -> Result<Vec<f32>, Box<dyn std::error::Error>> {
        let logits = m.forward(probe.clone())?;
        Ok(log_softmax(logits, 2)
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| format!("{e:?}"))?)
    };
    let before = log_probs(&model.valid())?;
    if std::env::var("FORWARD_CHECK").is_ok() {
        // Each row's logits inside the batch against the row cut to its length and run alone.
        let plain = model.valid();
        let batch = plain.forward(input.clone().inner())?;
        let ids_host = input
            .clone()
            .inner()
            .into_data()
            .convert::<i64>()
            .to_vec::<i64>()
            .map_err(|e| format!("{e:?}"))?;
        for (r, &l) in lengths.iter().enumerate() {
            let row = Tensor::<B, 2, Int>::from_data(
                TensorData::new(ids_host[r * width..r * width + l].to_vec(), [1, l]),
                &device,
            );
            let alone = plain
                .forward(row)?
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .map_err(|e| format!("{e:?}"))?;
            let inside = batch
                .clone()
                .slice([r..r + 1, 0..l])
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .map_err(|e| format!("{e:?}"))?;
            let d = max_abs_diff(&alone, &inside);
            let big = inside.iter().fold(0f32, |m, a| m.max(a.abs()));
            println!("row {r} ({l} tokens): logits alone vs in the batch differ by up to {d:.3e} (largest logit {big:.1})");
        }
    }
    let mut out = Vec::new();
    let model64 = model.clone().map_named_params(&mut CastF64);
    let config64 = DynEvalConfig {
        lr,
        loss_mask: LossMask::Targets(targets.clone()),
        memory: GradientMemory::WholeGraph,
        ..Default::default()
    };
    let truth = sgd_update(&model64, input.clone(), &config64)?;
    println!("float64 whole graph: loss {:.7}", truth.losses[0]);
    let truth = log_probs(&truth.model.valid())?;
    let least64 = sgd_update(
        &model64,
        input.clone(),
        &DynEvalConfig {
            memory: GradientMemory::Least,
            ..config64.clone()
        },
    )?;
    let least64 = log_probs(&least64.model.valid())?;
    let d64 = max_abs_diff(&least64, &truth);
    println!("float64 block by block vs float64 whole graph: up to {d64:.3e}");
    for memory in [GradientMemory::WholeGraph, GradientMemory::Least] {
        let config = DynEvalConfig {
            lr,
            loss_mask: LossMask::Targets(targets.clone()),
            memory,
            ..Default::default()
        };
        let update = sgd_update(&model, input.clone(), &config)?;
        println!("{memory:?}: loss {:.7}", update.losses[0]);
        out.push(log_probs(&update.model.valid())?);
    }
    let moved = max_abs_diff(&out[0], &before);
    let differ = max_abs_diff(&out[0], &out[1]);
    for (name, o) in ["whole graph", "block by block"].iter().zip(&out) {
        let d = max_abs_diff(o, &truth);
        println!("float32 {name} vs float64: up to {d:.3e}");
    }
    println!(
        "lr {lr:e}: the step moved the probe's log-probabilities by up to {moved:.4}; whole graph \
         vs block by block in pieces differ by up to {differ:.3e}"
    );
    Ok(())
}
