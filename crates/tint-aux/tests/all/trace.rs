//! The traced intermediates and the public weight fields satisfy the block equations of
//! docs/construction.md §9.1, recomputed here in plain f64 loops from the model's own fields.

use crate::common::*;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{load_model, AuxModel};

/// f32 forward against f64 plain math on values of order 1 with sums over at most 128 terms.
const PLAIN_MATH_TOL: f64 = 1e-4;

/// A row-major matrix in f64.
struct Mat {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Mat {
    fn from<const D: usize>(t: Tensor<TestBackend, D>) -> Mat {
        let dims = t.dims();
        let cols = dims[D - 1];
        let data = t.into_data().convert::<f64>().to_vec::<f64>().unwrap();
        Mat {
            rows: data.len() / cols,
            cols,
            data,
        }
    }

    fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }

    /// `self @ w + b` with `w` `[in, out]`.
    fn affine(&self, w: &Mat, b: &Mat) -> Mat {
        assert_eq!(self.cols, w.rows);
        let mut data = vec![0.0; self.rows * w.cols];
        for r in 0..self.rows {
            for c in 0..w.cols {
                data[r * w.cols + c] = b.data[c]
                    + (0..self.cols)
                        .map(|k| self.at(r, k) * w.at(k, c))
                        .sum::<f64>();
            }
        }
        Mat {
            rows: self.rows,
            cols: w.cols,
            data,
        }
    }

    fn layer_norm(&self, gamma: &Mat, beta: &Mat, eps: f64) -> Mat {
        let mut data = Vec::with_capacity(self.data.len());
        for r in 0..self.rows {
            let row = &self.data[r * self.cols..(r + 1) * self.cols];
            let mean = row.iter().sum::<f64>() / self.cols as f64;
            let var = row.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / self.cols as f64;
            data.extend(
                row.iter()
                    .enumerate()
                    .map(|(c, x)| (x - mean) / (var + eps).sqrt() * gamma.data[c] + beta.data[c]),
            );
        }
        Mat {
            rows: self.rows,
            cols: self.cols,
            data,
        }
    }

    fn map(&self, f: impl Fn(f64) -> f64) -> Mat {
        Mat {
            rows: self.rows,
            cols: self.cols,
            data: self.data.iter().map(|&x| f(x)).collect(),
        }
    }

    fn add(&self, other: &Mat) -> Mat {
        Mat {
            rows: self.rows,
            cols: self.cols,
            data: self
                .data
                .iter()
                .zip(&other.data)
                .map(|(a, b)| a + b)
                .collect(),
        }
    }

    fn assert_close(&self, other: &Mat, what: &str) {
        assert_eq!(
            (self.rows, self.cols),
            (other.rows, other.cols),
            "{what}: shape"
        );
        let diff = self
            .data
            .iter()
            .zip(&other.data)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(diff <= PLAIN_MATH_TOL, "{what}: differs by {diff}");
    }
}

fn gelu_new(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
}

fn check(name: &str) {
    let device = Default::default();
    let model: AuxModel<TestBackend> = load_model(&aux_fixture(name), &device).unwrap();
    let seq_length = 9;
    let ids: Vec<i64> = (0..seq_length as i64)
        .map(|i| (i * 53 + 11) % 512)
        .collect();
    let input =
        Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(ids, [1, seq_length]), &device);
    let trace = model.forward_traced(input.clone()).unwrap();
    Mat::from(model.forward(input).unwrap())
        .assert_close(&Mat::from(trace.logits.clone()), "forward vs traced logits");

    let (blocks, pre_ln, act): (_, bool, fn(f64) -> f64) = match &model {
        AuxModel::Gpt2(m) => (&m.blocks, true, gelu_new),
        AuxModel::Opt(m) => (&m.blocks, m.config.do_layer_norm_before, |x: f64| {
            x.max(0.0)
        }),
        _ => unreachable!("fixtures are GPT-2 and OPT"),
    };
    for (l, (block, t)) in blocks.iter().zip(&trace.layers).enumerate() {
        let p = |x: &burn::module::Param<Tensor<TestBackend, 1>>| Mat::from(x.val());
        let w = |x: &burn::nn::Linear<TestBackend>| {
            (
                Mat::from(x.weight.val()),
                Mat::from(x.bias.as_ref().unwrap().val()),
            )
        };
        let h_in = Mat::from(t.block_input.clone());
        let attn_in = if pre_ln {
            let ln1 = h_in.layer_norm(&p(&block.ln1.gamma), &p(&block.ln1.beta), block.ln1.epsilon);
            ln1.assert_close(
                &Mat::from(t.ln1_output.clone()),
                &format!("{name} layer {l}: ln1"),
            );
            ln1
        } else {
            h_in.add(&Mat::from(t.attn_output.clone()))
                .layer_norm(&p(&block.ln1.gamma), &p(&block.ln1.beta), block.ln1.epsilon)
                .assert_close(
                    &Mat::from(t.h_mid.clone()),
                    &format!("{name} layer {l}: post-LN h_mid"),
                );
            Mat::from(t.block_input.clone())
        };

        // Attention from W_Q, W_K, W_V, per head, causal.
        let (wq, bq) = w(&block.attn.query);
        let (wk, bk) = w(&block.attn.key);
        let (wv, bv) = w(&block.attn.value);
        let (q, k, v) = (
            attn_in.affine(&wq, &bq),
            attn_in.affine(&wk, &bk),
            attn_in.affine(&wv, &bv),
        );
        let n_heads = block.attn.n_heads;
        let d_k = q.cols / n_heads;
        let probs = Mat::from(t.attn_probs.clone());
        let mut context = vec![0.0; seq_length * q.cols];
        for h in 0..n_heads {
            for i in 0..seq_length {
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        (0..d_k)
                            .map(|c| q.at(i, h * d_k + c) * k.at(j, h * d_k + c))
                            .sum::<f64>()
                            / (d_k as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                for j in 0..seq_length {
                    let want = if j <= i {
                        (scores[j] - max).exp() / z
                    } else {
                        0.0
                    };
                    let got = probs.at(h * seq_length + i, j);
                    assert!(
                        (got - want).abs() <= PLAIN_MATH_TOL,
                        "{name} layer {l} head {h} probs[{i},{j}]: {got} vs {want}"
                    );
                    if j <= i {
                        for c in 0..d_k {
                            context[i * q.cols + h * d_k + c] += want * v.at(j, h * d_k + c);
                        }
                    }
                }
            }
        }
        let context = Mat {
            rows: seq_length,
            cols: q.cols,
            data: context,
        };
        context.assert_close(
            &Mat::from(t.attn_context.clone()),
            &format!("{name} layer {l}: context"),
        );
        let (wo, bo) = w(&block.attn.output);
        context.affine(&wo, &bo).assert_close(
            &Mat::from(t.attn_output.clone()),
            &format!("{name} layer {l}: attn output"),
        );

        // MLP: u = m W_fc + b_fc, v = act(u), out = v W_proj + b_proj.
        let h_mid = Mat::from(t.h_mid.clone());
        let m = if pre_ln {
            h_in.add(&Mat::from(t.attn_output.clone()))
                .assert_close(&h_mid, &format!("{name} layer {l}: h_mid"));
            let m = h_mid.layer_norm(&p(&block.ln2.gamma), &p(&block.ln2.beta), block.ln2.epsilon);
            m.assert_close(
                &Mat::from(t.ln2_output.clone()),
                &format!("{name} layer {l}: ln2"),
            );
            m
        } else {
            h_mid
        };
        let (wf, bf) = w(&block.fc);
        let u = m.affine(&wf, &bf);
        u.assert_close(
            &Mat::from(t.mlp_pre_activation.clone()),
            &format!("{name} layer {l}: u"),
        );
        let v = u.map(act);
        v.assert_close(
            &Mat::from(t.mlp_activation.clone()),
            &format!("{name} layer {l}: v"),
        );
        let (wp, bp) = w(&block.proj);
        let residual = Mat::from(t.h_mid.clone());
        let sum = residual.add(&v.affine(&wp, &bp));
        let out = if pre_ln {
            sum
        } else {
            sum.layer_norm(&p(&block.ln2.gamma), &p(&block.ln2.beta), block.ln2.epsilon)
        };
        out.assert_close(
            &Mat::from(t.block_output.clone()),
            &format!("{name} layer {l}: block output"),
        );
    }
    Mat::from(trace.final_hidden.clone()).assert_close(
        &Mat::from(trace.layers.last().unwrap().block_output.clone()),
        "final hidden",
    );
}

#[test]
fn gpt2_trace_satisfies_the_block_equations() {
    check("gpt2-tiny");
}

#[test]
fn opt_trace_satisfies_the_block_equations() {
    check("opt-pre-ln");
    check("opt-post-ln");
}

#[test]
fn gpt2_lm_head_is_tied_to_wte() {
    let device = Default::default();
    let model: AuxModel<TestBackend> = load_model(&aux_fixture("gpt2-tiny"), &device).unwrap();
    let input = Tensor::<TestBackend, 2, Int>::from_data(
        TensorData::new(vec![3i64, 9, 27], [1, 3]),
        &device,
    );
    let trace = model.forward_traced(input).unwrap();
    let AuxModel::Gpt2(gpt2) = &model else {
        unreachable!()
    };
    let hf = Mat::from(trace.final_hidden.clone()).layer_norm(
        &Mat::from(gpt2.ln_f.gamma.val()),
        &Mat::from(gpt2.ln_f.beta.val()),
        gpt2.ln_f.epsilon,
    );
    hf.assert_close(&Mat::from(trace.final_normed.clone()), "ln_f");
    let wte = Mat::from(gpt2.wte.val());
    let mut logits = vec![0.0; 3 * wte.rows];
    for t in 0..3 {
        for v in 0..wte.rows {
            logits[t * wte.rows + v] = (0..wte.cols).map(|c| hf.at(t, c) * wte.at(v, c)).sum();
        }
    }
    Mat {
        rows: 3,
        cols: wte.rows,
        data: logits,
    }
    .assert_close(&Mat::from(trace.logits), "logits = hf E^T");
}
