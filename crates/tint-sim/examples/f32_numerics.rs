//! Where does the float32 error of a simulated TinT step come from? Runs the LLaMA functional
//! reference on SmolLM2-135M in float64 and float32 on one SOTU block and compares every
//! intermediate the reference reports (`LlamaReference::forward_observed`): forward activations,
//! loss gradient, each layer's backward signals, each weight update, final logits. It also measures
//! the *local* float32 error of each first-order backward (final norm, RMSNorm₂, SwiGLU gate,
//! RMSNorm₁): the op evaluated in float32 on the float64 run's inputs (rounded to float32) against the
//! op in float64, which separates the error an op creates from the error it receives.
//!
//! ```text
//! cargo run -p tint-sim --example f32_numerics -- [n_sim=30] [block=0] [train_fraction=0.5] \
//!     [fd|exact] [inner_lr=1e-4] [gguf=.cache/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]
//! ```
//!
//! Output: one line per intermediate, `name  max|f32 - f64|  max|f64|  ratio`, then the local errors
//! and the evaluation NLL of both runs (docs/tint-llama.md, "Float32 numerics").
//!
//! Last, the *conditioning* of the step: a third float64 run whose weights are each multiplied by
//! `1 + u`, `u` uniform in `[-2⁻²⁴, 2⁻²⁴]` (the relative rounding error of float32), against the
//! first float64 run. No float32 arithmetic is involved, so what that perturbation moves in the final
//! logits is what any float32 evaluation of this step must be expected to move them by, whatever the
//! formulas: a floor for the float32 error, not an error of the code.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tint_sim::StepConfig;

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Distribution, Int, Tensor, TensorData};
use tint_aux::AuxModel;
use tint_sim::llama::math::{rms_norm_backward, swiglu_backward};
use tint_sim::llama::{LlamaParams, LlamaReference, LlamaTintConfig};
use tint_sim::{DerivativeMode, SimInput};

type B = burn::backend::Flex;

const SEQ_LENGTH: usize = 256;

fn max_abs(t: Tensor<B, 2>) -> f64 {
    t.abs()
        .max()
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .unwrap()[0]
}

/// `max |a - b|` in float64.
fn diff(a: &Tensor<B, 2>, b: &Tensor<B, 2>) -> f64 {
    max_abs(a.clone().cast(DType::F64) - b.clone().cast(DType::F64))
}

/// Unit roundoff of float32, `2⁻²⁴`.
const F32_UNIT_ROUNDOFF: f64 = 5.960_464_477_539_063e-8;

/// Every weight multiplied by `1 + u`, `u` uniform in `[-2⁻²⁴, 2⁻²⁴]` (seeded): the size of the
/// relative error one float32 rounding makes.
fn perturbed(params: &LlamaParams<B>) -> LlamaParams<B> {
    B::seed(&Default::default(), 2024);
    let u = |shape: burn::tensor::Shape, dtype: DType| {
        Tensor::<B, 1>::random(
            [shape.num_elements()],
            Distribution::Uniform(-F32_UNIT_ROUNDOFF, F32_UNIT_ROUNDOFF),
            &Default::default(),
        )
        .cast(dtype)
    };
    params.map_weights(
        |t| {
            let noise = u(t.shape(), t.dtype());
            t * (noise + 1.0)
        },
        |t| {
            let noise = u(t.shape(), t.dtype()).reshape(t.shape());
            t * (noise + 1.0)
        },
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let n_sim: usize = arg(1).and_then(|s| s.parse().ok()).unwrap_or(30);
    let block: usize = arg(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let fraction: f64 = arg(3).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let mode = match arg(4).unwrap_or("fd") {
        "exact" => DerivativeMode::Exact,
        _ => DerivativeMode::FiniteDifference,
    };
    let lr: f64 = arg(5).and_then(|s| s.parse().ok()).unwrap_or(1e-4);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let gguf = arg(6)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
    let device = Default::default();
    let model: AuxModel<B> = tint_aux::load_model(&gguf, &device).expect("loads the GGUF");
    let text = std::fs::read_to_string(root.join("fixtures/text/sotu-1790-washington.txt"))
        .expect("SOTU fixture");
    let ids = tint_aux::gguf_tokenizer(&gguf)
        .expect("tokenizer")
        .encode(&text)
        .expect("tokenizes");
    let chunk: Vec<i64> = ids[block * SEQ_LENGTH..(block + 1) * SEQ_LENGTH]
        .iter()
        .map(|&t| t as i64)
        .collect();
    let train_length = (SEQ_LENGTH as f64 * fraction).floor() as usize;
    let input_ids =
        Tensor::<B, 2, Int>::from_data(TensorData::new(chunk, [1, SEQ_LENGTH]), &device);
    let input = SimInput::with_train_lengths(input_ids, &[train_length]).expect("input");
    let config = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(n_sim),
            inner_lr: lr,
            derivatives: mode,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let params32 = LlamaParams::from_aux(&model).expect("LLaMA weights");
    let params64 = params32.cast(DType::F64);
    let ref64 = LlamaReference::from_params(params64.clone(), config.clone()).expect("config");
    let ref64_perturbed =
        LlamaReference::from_params(perturbed(&params64), config.clone()).expect("config");
    let ref32 = LlamaReference::from_params(params32, config.clone()).expect("config");
    println!(
        "# SmolLM2 block {block}, T = {SEQ_LENGTH}, train {train_length}, n_sim {n_sim}, lr {lr:e}, {mode:?}"
    );

    let start = std::time::Instant::now();
    let mut stored: HashMap<String, Tensor<B, 2>> = HashMap::new();
    let (out64, _) = ref64
        .forward_observed(&input, &mut |name, t| {
            stored.insert(name.to_string(), t);
        })
        .expect("f64 run");
    println!("# f64 run {:.1} s", start.elapsed().as_secs_f64());
    let start = std::time::Instant::now();
    let mut lines = Vec::new();
    let (out32, _) = ref32
        .forward_observed(&input, &mut |name, t| {
            let reference = &stored[name];
            let d = diff(&t, reference);
            let scale = max_abs(reference.clone());
            lines.push(format!(
                "{name:<22} {d:>11.3e} {scale:>11.3e} {:>11.3e}",
                d / scale
            ));
        })
        .expect("f32 run");
    println!("# f32 run {:.1} s", start.elapsed().as_secs_f64());
    println!("# name                  max|f32-f64|    max|f64|      ratio");
    for line in &lines {
        println!("{line}");
    }

    // Local errors: each first-order backward in f32 on the f64 run's inputs.
    let (eps, s) = (params64.rms_eps, config.step.scale_embeddings);
    let get = |name: &str| stored[&format!("b0 {name}")].clone();
    let local_rms = |x: Tensor<B, 2>, gain: &Tensor<B, 1>, dy: Tensor<B, 2>| {
        let exact64 = rms_norm_backward(x.clone(), gain, dy.clone(), eps, mode, s);
        let got32 = rms_norm_backward(
            x.clone().cast(DType::F32),
            &gain.clone().cast(DType::F32),
            dy.clone().cast(DType::F32),
            eps,
            mode,
            s,
        );
        // The literal `s (f(x + v/s) - f(x))` in f32, as the code computed it before the
        // cancellation-free form: the error the rewrite removes.
        let literal32 = {
            let (x, v) = (
                x.cast(DType::F32),
                dy.cast(DType::F32) * gain.clone().cast(DType::F32).unsqueeze_dim::<2>(0),
            );
            let f = |t: Tensor<B, 2>| t.clone() / t.square().mean_dim(1).add_scalar(eps).sqrt();
            (f(x.clone() + v.div_scalar(s)) - f(x)).mul_scalar(s)
        };
        let literal = if matches!(mode, DerivativeMode::FiniteDifference) {
            diff(&literal32, &exact64)
        } else {
            f64::NAN
        };
        (diff(&got32, &exact64), max_abs(exact64), literal)
    };
    println!(
        "# local f32 error of each backward op on f64 inputs: op  max|err|  max|f64 out|  ratio  \
         (literal f32 form: max|err|)"
    );
    let (e, m, lit) = local_rms(get("h_last"), &params64.final_norm, get("grad"));
    println!(
        "final_norm_back        {e:>11.3e} {m:>11.3e} {:>11.3e}  (literal {lit:.3e})",
        e / m
    );
    let n_layers = params64.layers.len();
    for l in (n_layers - n_sim..n_layers).rev() {
        let layer = &params64.layers[l];
        let gate_pre = get(&format!("L{l} gate_pre"));
        let up = get(&format!("L{l} up"));
        let d_hidden = get(&format!("L{l} d_hidden"));
        let (g64, _) = swiglu_backward(gate_pre.clone(), up.clone(), d_hidden.clone(), mode, s);
        let (g32, _) = swiglu_backward(
            gate_pre.cast(DType::F32),
            up.cast(DType::F32),
            d_hidden.cast(DType::F32),
            mode,
            s,
        );
        let (eg, mg) = (diff(&g32, &g64), max_abs(g64));
        let (e2, m2, lit2) = local_rms(
            get(&format!("L{l} h_mid")),
            &layer.mlp_norm,
            get(&format!("L{l} dm")),
        );
        let (e1, m1, lit1) = local_rms(
            get(&format!("L{l} h_in")),
            &layer.attn_norm,
            get(&format!("L{l} da")),
        );
        let xmax = max_abs(get(&format!("L{l} h_in")));
        println!(
            "L{l:<2} d_gate {eg:.3e}/{mg:.3e}  rms2_back {e2:.3e}/{m2:.3e} (literal {lit2:.3e})  \
             rms1_back {e1:.3e}/{m1:.3e} (literal {lit1:.3e})  max|h_in| {xmax:.1}"
        );
    }
    println!(
        "# eval NLL: vanilla f64 {:.6} f32 {:.6}; step f64 {:.6} f32 {:.6} (|diff| {:.2e}); final logits max|f32-f64| {:.3e}",
        out64.first_loss.mean(),
        out32.first_loss.mean(),
        out64.final_loss.mean(),
        out32.final_loss.mean(),
        (out64.final_loss.mean() - out32.final_loss.mean()).abs(),
        max_abs(
            (out32.final_logits.cast(DType::F64) - out64.final_logits.clone()).squeeze_dim::<2>(0)
        ),
    );
    let flat = |t: Tensor<B, 3>| t.squeeze_dim::<2>(0);
    let start = std::time::Instant::now();
    let (perturbed64, _) = ref64_perturbed
        .forward_with_params(&input)
        .expect("perturbed f64 run");
    println!(
        "# conditioning ({:.1} s): f64 with every weight x (1 + u), |u| <= 2^-24, against f64: \
         first-pass logits max|diff| {:.3e}, final logits max|diff| {:.3e}, eval NLL |diff| {:.2e}; \
         the step moves the f64 logits by up to {:.3e}",
        start.elapsed().as_secs_f64(),
        diff(
            &flat(perturbed64.first_logits.clone()),
            &flat(out64.first_logits.clone())
        ),
        diff(
            &flat(perturbed64.final_logits.clone()),
            &flat(out64.final_logits.clone())
        ),
        (perturbed64.final_loss.mean() - out64.final_loss.mean()).abs(),
        diff(&flat(out64.final_logits.clone()), &flat(out64.first_logits.clone())),
    );
}
