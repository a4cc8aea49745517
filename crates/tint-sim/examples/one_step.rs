//! One TinT step, as a library user runs it: on the committed micro GPT-2
//! (`fixtures/official-tint/micro-gpt2-random`, random weights), the constructed network trains on
//! the first half of a sequence inside its own forward pass and scores the second half; the
//! functional reference computes the same update with plain tensors; dynamic evaluation takes the
//! matching SGD step (`lr = η (train tokens − 1)` on its mean loss) on the parameters TinT moves.
//!
//! ```sh
//! cargo run -p tint-sim --example one_step
//! ```
//!
//! It exits with an error if the constructed network and the reference disagree beyond the float32
//! tolerance of docs/construction.md §9.4 (2e-3 on logits; their losses agree far closer).
#![allow(clippy::print_stdout)] // the example reports on the terminal

use std::path::Path;

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{dynamic_eval, DynEvalConfig};
use tint_sim::{build, Engine, Execution, SimInput, TintConfig};

/// Constructed vs reference, final logits, f32 (docs/construction.md §9.4).
const LOGIT_TOL: f32 = 2e-3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/official-tint/micro-gpt2-random");
    let device = Default::default();
    let model = tint_aux::load_model::<Flex>(&dir, &device)?;

    // The micro model's TinT sizes (D = 32: P = 8 prefixes, Ds = 160, 20 heads), one step of η.
    let eta = 1e-1;
    let mut config = TintConfig::for_model(model.hidden_size(), 8, 8);
    config.step.inner_lr = eta;
    let (seq_length, train_length) = (24, 12);
    let ids: Vec<i64> = (0..seq_length as i64).map(|t| (t * 37 + 5) % 400).collect();
    let input_ids =
        Tensor::<Flex, 2, Int>::from_data(TensorData::new(ids.clone(), [1, seq_length]), &device);
    let input = SimInput::with_train_lengths(input_ids, &[train_length])?;

    let constructed = build(
        &model,
        &config,
        Engine::Simulator(Execution::Constructed),
        None,
    )?;
    let reference = build(&model, &config, Engine::Reference, None)?;
    let tint = constructed.forward(&input)?;
    let fast = reference.forward(&input)?;
    let gap: f32 = (tint.final_logits.clone() - fast.final_logits.clone())
        .abs()
        .max()
        .into_scalar();
    println!(
        "TinT (constructed): eval NLL {:.4} -> {:.4} after one step on {train_length} tokens",
        tint.first_loss.mean(),
        tint.final_loss.mean()
    );
    println!(
        "TinT (reference):   eval NLL {:.4} -> {:.4}; final logits differ by {gap:.1e}",
        fast.first_loss.mean(),
        fast.final_loss.mean()
    );

    // Dynamic evaluation on the parameters a TinT step moves (GPT-2: value, output, MLP, norms).
    let trainable = tint_aux::load_model::<Autodiff<Flex>>(&dir, &device)?;
    let ids_ad =
        Tensor::<Autodiff<Flex>, 2, Int>::from_data(TensorData::new(ids, [1, seq_length]), &device);
    let dyn_eval = dynamic_eval(
        &trainable,
        ids_ad,
        train_length,
        &DynEvalConfig {
            lr: eta * (train_length - 1) as f64,
            params: tint_sim::tint_updated_params(&trainable, None),
            ..Default::default()
        },
    )?;
    let nll = &dyn_eval.eval_nll[0];
    println!(
        "dynamic evaluation: eval NLL {:.4} (one SGD step, exact gradients)",
        nll.iter().sum::<f64>() / nll.len() as f64
    );

    if gap > LOGIT_TOL {
        return Err(format!("constructed and reference differ by {gap} > {LOGIT_TOL}").into());
    }
    Ok(())
}
