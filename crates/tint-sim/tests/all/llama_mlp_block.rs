//! The SwiGLU MLP simulated with tint-ops modules (LinearForward, GluForward, LinearBackwardDescent,
//! GluBackward) equals the functional reference's MLP forward, first-order backward and descent,
//! on the tiny LLaMA fixture's weights (D = 64, d_ff = 96 zero-padded to 2 chunks), in f64.

use std::path::PathBuf;

use burn::backend::Flex;
use burn::tensor::{DType, Distribution, Tensor, TensorData};
use tint_ops::{Derivative, SimContext, TintDims, TintOptions};
use tint_sim::config::DerivativeMode;
use tint_sim::llama::math::{swiglu, swiglu_backward};
use tint_sim::llama::mlp_block::SimulatedSwiGlu;
use tint_sim::llama::LlamaParams;

/// f64 with exact gates: the modules run the same products in other orders and the first-order
/// step `s (silu(g + dy/s) - silu(g))` multiplies round-off (1e-16) by s = 1000 → ~1e-12 on O(1)
/// values; 1e-9 leaves margin while any wrong term (O(1e-2) or more) fails.
const SIM_VS_REFERENCE_TOL: f64 = 1e-9;

fn values<const D: usize>(t: Tensor<Flex, D>) -> Vec<f64> {
    t.into_data().convert::<f64>().to_vec().unwrap()
}

fn max_abs_diff<const D: usize>(a: Tensor<Flex, D>, b: Tensor<Flex, D>) -> f64 {
    values(a)
        .iter()
        .zip(values(b))
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn simulated_swiglu_equals_the_reference_mlp_step() {
    let device = Default::default();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny");
    let model = tint_aux::load_model::<Flex>(&dir, &device).unwrap();
    let params = LlamaParams::from_aux(&model).unwrap().cast(DType::F64);
    let layer = &params.layers[1];
    let (d, d_ff, t) = (64, 96, 7);
    let (s, eta) = (1000.0, 0.05);
    // D = 64, H = 4, Ds = D (S + 1) = 320, P = 16, Hs = 20 (head 16), Tmax = 32.
    let dims = TintDims::new(d, 4, 320, 16, 20, 32, t).unwrap();
    let options = TintOptions::default()
        .with_float_dtype(DType::F64)
        .with_derivative(Derivative::FiniteDifference { scale: s })
        .with_inner_lr(eta);
    let block = SimulatedSwiGlu::<Flex>::new(&dims, &options, &device).unwrap();
    let prefixes = block
        .write_prefixes(
            layer.w_gate.clone().unsqueeze_dim(0),
            layer.w_up.clone().unsqueeze_dim(0),
            layer.w_down.clone().unsqueeze_dim(0),
        )
        .unwrap();
    assert_eq!(
        prefixes.gate.len(),
        2,
        "96 hidden units pad to 2 chunks of 64"
    );

    let train: Vec<f64> = (0..t).map(|i| if i < 4 { 1.0 } else { 0.0 }).collect();
    let train_mask = Tensor::<Flex, 2>::from_data(
        TensorData::new(train.clone(), [1, t]),
        (&device, DType::F64),
    );
    let ctx = SimContext::new(&dims, train_mask, &device).unwrap();
    let random = |shape: [usize; 2]| {
        Tensor::<Flex, 2>::random(shape, Distribution::Normal(0.0, 1.0), &device).cast(DType::F64)
    };
    let (p, ds) = (dims.n_prefixes(), dims.d_sim());
    let state_with = |signal: Tensor<Flex, 2>| {
        let tokens = Tensor::cat(
            vec![signal, Tensor::zeros([t, ds - d], (&device, DType::F64))],
            1,
        );
        Tensor::cat(
            vec![Tensor::zeros([p, ds], (&device, DType::F64)), tokens],
            0,
        )
        .unsqueeze_dim::<3>(0)
    };
    let signal = |state: Tensor<Flex, 3>| state.squeeze_dim::<2>(0).slice([p..p + t, 0..d]);

    // Forward.
    let m = random([t, d]);
    let (out, acts) = block.forward(state_with(m.clone()), &prefixes, &ctx);
    let gate_pre = m.clone().matmul(layer.w_gate.clone());
    let up = m.clone().matmul(layer.w_up.clone());
    let hidden = swiglu(gate_pre.clone(), up.clone());
    let y = hidden.clone().matmul(layer.w_down.clone());
    let err = max_abs_diff(signal(out), y);
    assert!(err < SIM_VS_REFERENCE_TOL, "forward differs by {err}");

    // Backward + descent.
    let delta = random([t, d]);
    let (back, updated) = block.backward(state_with(delta.clone()), &prefixes, &acts, &ctx);
    let d_hidden = delta.clone().matmul(layer.w_down.clone().transpose());
    let (d_gate, d_up) =
        swiglu_backward(gate_pre, up, d_hidden, DerivativeMode::FiniteDifference, s);
    let dm = d_gate.clone().matmul(layer.w_gate.clone().transpose())
        + d_up.clone().matmul(layer.w_up.clone().transpose());
    let err = max_abs_diff(signal(back), dm);
    assert!(err < SIM_VS_REFERENCE_TOL, "backward differs by {err}");

    let tr = Tensor::<Flex, 2>::from_data(TensorData::new(train, [t, 1]), (&device, DType::F64));
    let descend = |w: &Tensor<Flex, 2>, x: Tensor<Flex, 2>, dy: Tensor<Flex, 2>| {
        w.clone() - x.transpose().matmul(dy * tr.clone()).mul_scalar(eta)
    };
    let weights = block.read_weights(&updated).unwrap();
    let before = block.read_weights(&prefixes).unwrap();
    let pad_cols = |w: Tensor<Flex, 3>| w.squeeze_dim::<2>(0).slice([0..d, 0..d_ff]);
    let expected_gate = descend(&layer.w_gate, m.clone(), d_gate);
    let expected_up = descend(&layer.w_up, m, d_up);
    let expected_down = descend(&layer.w_down, hidden, delta);
    assert!(
        max_abs_diff(pad_cols(before.w_gate.clone()), expected_gate.clone()) > 1e-3,
        "the step moves W_gate"
    );
    for (what, got, expected) in [
        ("w_gate", pad_cols(weights.w_gate.clone()), expected_gate),
        ("w_up", pad_cols(weights.w_up.clone()), expected_up),
        (
            "w_down",
            weights
                .w_down
                .clone()
                .squeeze_dim::<2>(0)
                .slice([0..d_ff, 0..d]),
            expected_down,
        ),
    ] {
        let err = max_abs_diff(got, expected);
        assert!(err < SIM_VS_REFERENCE_TOL, "{what} differs by {err}");
    }
    // Padded hidden units stay exactly 0.
    let padded = weights
        .w_gate
        .squeeze_dim::<2>(0)
        .slice([0..d, d_ff..2 * d])
        .abs()
        .max();
    assert_eq!(values(padded)[0], 0.0);
    let padded = weights
        .w_down
        .squeeze_dim::<2>(0)
        .slice([d_ff..2 * d, 0..d])
        .abs()
        .max();
    assert_eq!(values(padded)[0], 0.0);
}

/// The MLP half of a LLaMA block (`h_mid + SwiGLU(RMSNorm(h_mid))`) from NormForward,
/// NormBackward (RMSNorm) and the simulated SwiGLU equals the reference's forward and first-order backward
/// (`delta_mid = delta + FD_rms(h_mid, gain, dm)`) and its SwiGLU descent.
#[test]
fn simulated_mlp_half_block_equals_the_reference() {
    use tint_sim::llama::math::{rms_norm, rms_norm_backward};
    use tint_sim::llama::mlp_half::SimulatedMlpHalf;
    let device = Default::default();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny");
    let model = tint_aux::load_model::<Flex>(&dir, &device).unwrap();
    let params = LlamaParams::from_aux(&model).unwrap().cast(DType::F64);
    let layer = &params.layers[0];
    let (d, t, s, eta) = (64, 6, 1000.0, 0.05);
    let dims = TintDims::new(d, 4, 320, 16, 20, 32, t).unwrap();
    let options = TintOptions::default()
        .with_float_dtype(DType::F64)
        .with_derivative(Derivative::FiniteDifference { scale: s })
        .with_ln_epsilon(params.rms_eps)
        .with_inner_lr(eta);
    let half = SimulatedMlpHalf::<Flex>::new(&dims, &options, &device).unwrap();
    let norm_prefix = half
        .norm_prefix(layer.mlp_norm.clone().unsqueeze_dim(0))
        .unwrap();
    let prefixes = half
        .mlp
        .write_prefixes(
            layer.w_gate.clone().unsqueeze_dim(0),
            layer.w_up.clone().unsqueeze_dim(0),
            layer.w_down.clone().unsqueeze_dim(0),
        )
        .unwrap();
    let train: Vec<f64> = (0..t).map(|i| if i < 3 { 1.0 } else { 0.0 }).collect();
    let train_mask =
        Tensor::<Flex, 2>::from_data(TensorData::new(train, [1, t]), (&device, DType::F64));
    let ctx = SimContext::new(&dims, train_mask, &device).unwrap();
    let (p, ds) = (dims.n_prefixes(), dims.d_sim());
    let random = |shape: [usize; 2], std: f64| {
        Tensor::<Flex, 2>::random(shape, Distribution::Normal(0.0, std), &device).cast(DType::F64)
    };
    let state_with = |signal: Tensor<Flex, 2>| {
        let tokens = Tensor::cat(
            vec![signal, Tensor::zeros([t, ds - d], (&device, DType::F64))],
            1,
        );
        Tensor::cat(
            vec![Tensor::zeros([p, ds], (&device, DType::F64)), tokens],
            0,
        )
        .unsqueeze_dim::<3>(0)
    };
    let signal = |state: Tensor<Flex, 3>| state.squeeze_dim::<2>(0).slice([p..p + t, 0..d]);

    let h_mid = random([t, d], 2.0);
    let (out, acts) = half.forward(state_with(h_mid.clone()), &norm_prefix, &prefixes, &ctx);
    let m = rms_norm(h_mid.clone(), &layer.mlp_norm, params.rms_eps);
    let gate_pre = m.clone().matmul(layer.w_gate.clone());
    let up = m.clone().matmul(layer.w_up.clone());
    let expected =
        h_mid.clone() + swiglu(gate_pre.clone(), up.clone()).matmul(layer.w_down.clone());
    let err = max_abs_diff(signal(out), expected);
    assert!(err < SIM_VS_REFERENCE_TOL, "forward differs by {err}");

    let delta = random([t, d], 1.0);
    let (back, updated) = half.backward(
        state_with(delta.clone()),
        &norm_prefix,
        &prefixes,
        &acts,
        &ctx,
    );
    let d_hidden = delta.clone().matmul(layer.w_down.clone().transpose());
    let (d_gate, d_up) =
        swiglu_backward(gate_pre, up, d_hidden, DerivativeMode::FiniteDifference, s);
    let dm = d_gate.matmul(layer.w_gate.clone().transpose())
        + d_up.matmul(layer.w_up.clone().transpose());
    let expected = delta
        + rms_norm_backward(
            h_mid,
            &layer.mlp_norm,
            dm,
            params.rms_eps,
            DerivativeMode::FiniteDifference,
            s,
        );
    let err = max_abs_diff(signal(back), expected);
    assert!(err < SIM_VS_REFERENCE_TOL, "backward differs by {err}");
    let moved = max_abs_diff(
        half.mlp.read_weights(&updated).unwrap().w_up,
        half.mlp.read_weights(&prefixes).unwrap().w_up,
    );
    assert!(moved > 1e-4, "the SwiGLU weights move ({moved})");
}
