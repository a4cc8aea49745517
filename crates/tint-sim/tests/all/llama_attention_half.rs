//! The attention half of a LLaMA block (`h_mid = h_in + W_O · RoPE-GQA-Attn(RMSNorm₁(h_in))`)
//! simulated with tint-ops modules (NormForward/Backward with RMSNorm, GqaAttentionForward /
//! GqaAttentionBackwardDescent, LinearForward / LinearBackwardDescent) equals the reference's
//! formulas — forward, value-only backward `delta_in`, and the `W_O`, `W_V` descent — on the tiny
//! LLaMA fixtures' weights (4 query heads, 2 KV heads, rope θ = 500), in f64.

use std::path::PathBuf;

use burn::backend::Flex;
use burn::tensor::activation::softmax;
use burn::tensor::{DType, Distribution, Tensor, TensorData};
use tint_ops::rotary::{apply_rotary, rotary_tables_dtype};
use tint_ops::{AttentionVariant, Derivative, SimContext, TintDims, TintOptions};
use tint_sim::config::DerivativeMode;
use tint_sim::llama::attention_half::{AttentionWeights, SimulatedAttentionHalf};
use tint_sim::llama::math::{rms_norm, rms_norm_backward};
use tint_sim::llama::LlamaParams;

/// f64 with exact gates: the modules run the same products in other orders, and the RMSNorm
/// first-order step multiplies round-off (1e-16) by s = 1000 → ~1e-12 on O(1) values; 1e-9 leaves
/// margin while any wrong term (O(1e-2) or more, the step is checked to move the weights) fails.
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

/// `[T, n · h_a]` → `[n, T, h_a]`.
fn heads(x: Tensor<Flex, 2>, n: usize) -> Tensor<Flex, 3> {
    let [t, w] = x.dims();
    x.reshape([t, n, w / n]).swap_dims(0, 1)
}

/// `[n, T, h_a]` → `[T, n · h_a]`.
fn merge(x: Tensor<Flex, 3>) -> Tensor<Flex, 2> {
    let [n, t, ha] = x.dims();
    x.swap_dims(0, 1).reshape([t, n * ha])
}

#[test]
fn simulated_attention_half_equals_the_reference_step() {
    let device = Default::default();
    for name in ["tiny", "tiny_tied"] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/llama")
            .join(name);
        let model = tint_aux::load_model::<Flex>(&dir, &device).unwrap();
        let params = LlamaParams::from_aux(&model).unwrap().cast(DType::F64);
        let layer = &params.layers[1];
        let (d, t, s, eta) = (64, 9, 1000.0, 0.05);
        let (h, n_kv, ha) = (params.n_heads, params.n_kv_heads, params.head_dim);
        assert_eq!((h, n_kv, ha), (4, 2, 16), "the fixtures use GQA");
        // D = 64, H = 4, Ds = 320, P = 16, Hs = 20 (head 16), Tmax = 32.
        let dims = TintDims::new(d, h, 320, 16, 20, 32, t).unwrap();
        let options = TintOptions::default()
            .with_float_dtype(DType::F64)
            .with_derivative(Derivative::FiniteDifference { scale: s })
            .with_ln_epsilon(params.rms_eps)
            .with_inner_lr(eta);
        let variant = AttentionVariant {
            n_kv_heads: n_kv,
            rope_theta: Some(params.rope_theta),
        };
        let half = SimulatedAttentionHalf::<Flex>::new(&dims, &variant, &options, &device).unwrap();
        let weights = AttentionWeights {
            w_q: layer.w_q.clone().unsqueeze_dim(0),
            w_k: layer.w_k.clone().unsqueeze_dim(0),
            w_v: layer.w_v.clone().unsqueeze_dim(0),
            w_o: layer.w_o.clone().unsqueeze_dim(0),
        };
        let prefixes = half
            .write_prefixes(layer.attn_norm.clone().unsqueeze_dim(0), &weights)
            .unwrap();
        let train: Vec<f64> = (0..t).map(|i| if i < 5 { 1.0 } else { 0.0 }).collect();
        let train_mask = Tensor::<Flex, 2>::from_data(
            TensorData::new(train.clone(), [1, t]),
            (&device, DType::F64),
        );
        let ctx = SimContext::new(&dims, train_mask, &device).unwrap();
        let (p, ds) = (dims.n_prefixes(), dims.d_sim());
        let random = |shape: [usize; 2], std: f64| {
            Tensor::<Flex, 2>::random(shape, Distribution::Normal(0.0, std), &device)
                .cast(DType::F64)
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

        // Forward: the reference layer's attention half.
        let h_in = random([t, d], 2.0);
        let (out, acts) = half.forward(state_with(h_in.clone()), &prefixes, &ctx);
        let eps = params.rms_eps;
        let a = rms_norm(h_in.clone(), &layer.attn_norm, eps);
        let (cos, sin) = rotary_tables_dtype::<Flex>(t, ha, params.rope_theta, &device, DType::F64);
        let rotate = |x: Tensor<Flex, 3>| {
            apply_rotary(x.unsqueeze_dim::<4>(0), cos.clone(), sin.clone()).squeeze_dim::<3>(0)
        };
        let q = rotate(heads(a.clone().matmul(layer.w_q.clone()), h));
        let k = rotate(heads(a.clone().matmul(layer.w_k.clone()), n_kv));
        let v = heads(a.clone().matmul(layer.w_v.clone()), n_kv);
        let n_rep = h / n_kv;
        let repeat = |x: Tensor<Flex, 3>| {
            x.unsqueeze_dim::<4>(1)
                .repeat_dim(1, n_rep)
                .reshape([h, t, ha])
        };
        let upper = Tensor::<Flex, 2>::ones([t, t], (&device, DType::F64)).triu(1);
        let scores = q.matmul(repeat(k).swap_dims(1, 2)) / (ha as f64).sqrt()
            + upper.unsqueeze::<3>() * -1e30;
        let probs = softmax(scores, 2); // [H, i, j]
        let o = merge(probs.clone().matmul(repeat(v)));
        let h_mid = h_in.clone() + o.clone().matmul(layer.w_o.clone());
        let err = max_abs_diff(signal(out), h_mid);
        assert!(
            err < SIM_VS_REFERENCE_TOL,
            "{name}: forward differs by {err}"
        );

        // Backward + descent of W_O and W_V (value-only, scores not differentiated).
        let delta_mid = random([t, d], 1.0);
        let (back, updated) = half.backward(
            state_with(delta_mid.clone()),
            &prefixes,
            &acts,
            &ctx,
            true,
            true,
        );
        let tr =
            Tensor::<Flex, 2>::from_data(TensorData::new(train, [t, 1]), (&device, DType::F64));
        let d_o = delta_mid.clone().matmul(layer.w_o.clone().transpose());
        // M[j, i] at [i, j]: 1 if i <= j or i trains.
        let backward_mask = (Tensor::<Flex, 2>::ones([t, t], (&device, DType::F64)).triu(0)
            + tr.clone())
        .clamp_max(1.0);
        let weights_ij = probs * backward_mask.unsqueeze::<3>();
        let dv_rep = weights_ij.swap_dims(1, 2).matmul(heads(d_o, h)); // [H, j, ha]
        let dv = merge(
            dv_rep
                .reshape([n_kv, n_rep, t, ha])
                .sum_dim(1)
                .reshape([n_kv, t, ha]),
        );
        let da = dv.clone().matmul(layer.w_v.clone().transpose());
        let expected = delta_mid.clone()
            + rms_norm_backward(
                h_in,
                &layer.attn_norm,
                da,
                eps,
                DerivativeMode::FiniteDifference,
                s,
            );
        let err = max_abs_diff(signal(back), expected);
        assert!(
            err < SIM_VS_REFERENCE_TOL,
            "{name}: backward differs by {err}"
        );
        let descend = |w: &Tensor<Flex, 2>, x: Tensor<Flex, 2>, dy: Tensor<Flex, 2>| {
            w.clone() - x.transpose().matmul(dy * tr.clone()).mul_scalar(eta)
        };
        let got = half.read_weights(&updated).unwrap();
        let expected_o = descend(&layer.w_o, o, delta_mid);
        let expected_v = descend(&layer.w_v, a, dv);
        for (what, got, before, expected) in [
            ("W_O", got.w_o, &layer.w_o, expected_o),
            ("W_V", got.w_v, &layer.w_v, expected_v),
        ] {
            let got = got.squeeze_dim::<2>(0);
            let moved = max_abs_diff(got.clone(), before.clone());
            assert!(moved > 1e-4, "{name}: {what} moves ({moved})");
            let err = max_abs_diff(got, expected);
            assert!(
                err < SIM_VS_REFERENCE_TOL,
                "{name}: {what} differs by {err}"
            );
        }
        // W_Q, W_K are not updated; the bias slots of the bias-free layers stay 0.
        let read = half.read_weights(&updated).unwrap();
        assert_eq!(
            max_abs_diff(read.w_q.squeeze_dim::<2>(0), layer.w_q.clone()),
            0.0
        );
        assert_eq!(
            max_abs_diff(read.w_k.squeeze_dim::<2>(0), layer.w_k.clone()),
            0.0
        );
        for block in [&updated.value, &updated.output] {
            let (_, bias) = tint_ops::prefix::read_linear(block.clone(), &dims).unwrap();
            assert_eq!(values(bias.abs().max())[0], 0.0, "{name}: bias stays 0");
        }
    }
}
