//! The low-rank operator generator `T^kappa(x; y) = x + dW^kappa(y) [x; 1]` (paper §3.1).

use burn::module::{Module, Param};
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::activation::{softmax, tanh};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use crate::config::{CgtConfig, Mixing};

/// One generated operator `T^kappa`, applied before one attention or MLP above the readout layer.
///
/// `dW(y) = L(y) R(y)^T` with `L(y) = sum_m sigma_m(y) L^m` (`[d_x, r]`),
/// `R(y) = sum_m sigma_m(y) R^m` (`[d_x + 1, r]`) and `sigma(y) = h(S [y; 1])` (`[M]`).
/// Should be created with [`TemplateGenerator::new`].
#[derive(Module, Debug)]
pub struct TemplateGenerator<B: Backend> {
    /// Left templates `L^m`, `[M, d_x, r]`.
    pub left: Param<Tensor<B, 3>>,
    /// Right templates `R^m`, `[M, d_x + 1, r]` (the last row acts on the constant 1: a bias).
    pub right: Param<Tensor<B, 3>>,
    /// Mixing map `S`: `y -> S [y; 1]`, `[d_y, M]` plus bias.
    pub selector: Linear<B>,
    /// Mixing non-linearity `h`.
    #[module(skip)]
    pub mixing: Mixing,
}

impl<B: Backend> TemplateGenerator<B> {
    /// Creates templates with normal weights: `L^m ~ N(0, init_std)`, `R^m ~ N(0, 1/sqrt(d_x))`, so the
    /// initial operator is a small perturbation of the identity.
    pub fn new(
        d_x: usize,
        d_y: usize,
        rank: usize,
        n_templates: usize,
        mixing: Mixing,
        init_std: f64,
        device: &B::Device,
    ) -> Self {
        let normal = |std: f64| Initializer::Normal { mean: 0.0, std };
        Self {
            left: normal(init_std).init([n_templates, d_x, rank], device),
            right: normal(1.0 / (d_x as f64).sqrt()).init([n_templates, d_x + 1, rank], device),
            selector: LinearConfig::new(d_y, n_templates)
                .with_initializer(normal(1.0 / (d_y as f64).sqrt()))
                .init(device),
            mixing,
        }
    }

    /// The generator of one operator of a model with `config` (`d_x`, `d_y`, rank, templates, mixing
    /// and initial scale from it).
    pub fn for_config(config: &CgtConfig, device: &B::Device) -> Self {
        Self::new(
            config.d_x,
            config.d_y,
            config.rank,
            config.n_templates,
            config.mixing,
            config.init_std,
            device,
        )
    }

    /// Mixing coefficients `sigma(y) = h(S [y; 1])`.
    ///
    /// # Shapes
    /// - `context`: `[batch_size, n, d_y]`
    /// - output: `[batch_size, n, M]`
    pub fn coefficients(&self, context: Tensor<B, 3>) -> Tensor<B, 3> {
        let logits = self.selector.forward(context);
        match self.mixing {
            Mixing::Tanh => tanh(logits),
            Mixing::Softmax => softmax(logits, 2),
        }
    }

    /// The mixed factors `L(y)` and `R(y)`.
    ///
    /// # Shapes
    /// - `context`: `[batch_size, n, d_y]`
    /// - output: `([batch_size, n, d_x, r], [batch_size, n, d_x + 1, r])`
    pub fn factors(&self, context: Tensor<B, 3>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let [batch_size, n, _] = context.dims();
        let [n_templates, d_x, rank] = self.left.dims();
        let sigma = self
            .coefficients(context)
            .reshape([batch_size * n, n_templates]);
        let left = sigma
            .clone()
            .matmul(self.left.val().reshape([n_templates, d_x * rank]))
            .reshape([batch_size, n, d_x, rank]);
        let right = sigma
            .matmul(self.right.val().reshape([n_templates, (d_x + 1) * rank]))
            .reshape([batch_size, n, d_x + 1, rank]);
        (left, right)
    }

    /// Applies `T(x; y) = x + dW(y) [x; 1]` position by position.
    ///
    /// # Shapes
    /// - `input`: `[batch_size, seq_length, d_x]`
    /// - `context`: `[batch_size, seq_length, d_y]` (dynamic `y`) or `[batch_size, 1, d_y]` (frozen `y`)
    /// - output: `[batch_size, seq_length, d_x]`
    pub fn forward(&self, input: Tensor<B, 3>, context: Tensor<B, 3>) -> Tensor<B, 3> {
        if context.dims()[1] == 1 {
            self.forward_frozen(input, context)
        } else {
            self.forward_dynamic(input, context)
        }
    }

    /// One operator per sample (frozen `y`): the factors once per sample, then ordinary batched
    /// matmuls over the sequence.
    ///
    /// # Shapes
    /// - `input`: `[batch_size, seq_length, d_x]`
    /// - `context`: `[batch_size, 1, d_y]`
    /// - output: `[batch_size, seq_length, d_x]`
    fn forward_frozen(&self, input: Tensor<B, 3>, context: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, seq_length, d_x] = input.dims();
        let ones = Tensor::<B, 3>::ones([batch_size, seq_length, 1], &input.device());
        // [batch_size, seq_length, d_x + 1]
        let augmented = Tensor::cat(vec![input.clone(), ones], 2);
        let (left, right) = self.factors(context);
        let rank = left.dims()[3];
        let right = right.reshape([batch_size, d_x + 1, rank]);
        let left = left.reshape([batch_size, d_x, rank]);
        input + augmented.matmul(right).matmul(left.swap_dims(1, 2))
    }

    /// One operator per position (dynamic `y`), without forming the per-position factors: with
    /// `sigma = sigma(y_s)`,
    /// `u_k = sum_m sigma_m ([x; 1] R^m)_k` and `dW(y_s) [x; 1] = sum_m sigma_m L^m u`,
    /// so two matmuls against all `M` templates at once (`[d_x + 1, M r]` and `[M r, d_x]`) and two
    /// weightings by `sigma` replace the `[batch_size, seq_length, d_x (+ 1), r]` factors and the
    /// `batch_size * seq_length` rank-`r` products of the direct form `([x; 1] R(y_s)) L(y_s)^T` (the
    /// same sums in another order: f32 rounding differs, ~1e-6 of the largest entry; `tests` compare
    /// both, values and gradients).
    ///
    /// # Shapes
    /// - `input`: `[batch_size, seq_length, d_x]`
    /// - `context`: `[batch_size, seq_length, d_y]`
    /// - output: `[batch_size, seq_length, d_x]`
    fn forward_dynamic(&self, input: Tensor<B, 3>, context: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, seq_length, d_x] = input.dims();
        let [n_templates, _, rank] = self.left.dims();
        let rows = batch_size * seq_length;
        let width = n_templates * rank;
        // [rows, M, 1]
        let sigma = self.coefficients(context).reshape([rows, n_templates, 1]);
        // R^m stacked by columns: [d_x + 1, M r], the last row acting on the constant 1.
        let right = self.right.val().swap_dims(0, 1).reshape([d_x + 1, width]);
        let projected = input
            .clone()
            .reshape([rows, d_x])
            .matmul(right.clone().narrow(0, 0, d_x))
            + right.narrow(0, d_x, 1);
        // u = sum_m sigma_m ([x; 1] R^m): [rows, 1, r]
        let mixed = (projected.reshape([rows, n_templates, rank]) * sigma.clone()).sum_dim(1);
        // L^m stacked by rows: [M r, d_x].
        let left = self.left.val().swap_dims(1, 2).reshape([width, d_x]);
        let delta = (sigma * mixed).reshape([rows, width]).matmul(left);
        input + delta.reshape([batch_size, seq_length, d_x])
    }

    /// The fixed affine map for one context vector, in the row convention `T(h) = h A + c`.
    ///
    /// Returns `(A, c)` with `A = I + R(y)[..d_x] L(y)^T` and `c = R(y)[d_x] L(y)^T`.
    ///
    /// # Shapes
    /// - `context`: `[d_y]`
    /// - output: `([d_x, d_x], [d_x])`
    pub fn affine_map(&self, context: Tensor<B, 1>) -> (Tensor<B, 2>, Tensor<B, 1>) {
        let d_y = context.dims()[0];
        let (left, right) = self.factors(context.reshape([1, 1, d_y]));
        let [_, _, d_x, rank] = left.dims();
        let left = left.reshape([d_x, rank]);
        let right = right.reshape([d_x + 1, rank]);
        // [d_x + 1, d_x]
        let delta = right.matmul(left.transpose());
        let device = delta.device();
        let identity = Tensor::<B, 2>::eye(d_x, &device);
        let matrix = identity + delta.clone().narrow(0, 0, d_x);
        let offset = delta.narrow(0, d_x, 1).reshape([d_x]);
        (matrix, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TestBackend;
    use burn::tensor::Distribution;

    /// f32 products of length <= 9 on O(1) values: rounding is ~1e-6.
    const TEMPLATE_TOLERANCE: f32 = 1e-4;

    fn generator(mixing: Mixing) -> TemplateGenerator<TestBackend> {
        TemplateGenerator::new(4, 3, 2, 5, mixing, 0.5, &Default::default())
    }

    /// Plain-math reference: `x + sum_k L_ik sum_j R_jk [x; 1]_j` with the factors mixed by hand.
    fn reference(generator: &TemplateGenerator<TestBackend>, x: &[f32], y: &[f32]) -> Vec<f32> {
        let left = generator.left.val().into_data().to_vec::<f32>().unwrap();
        let right = generator.right.val().into_data().to_vec::<f32>().unwrap();
        let weight = generator
            .selector
            .weight
            .val()
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let bias = generator
            .selector
            .bias
            .as_ref()
            .unwrap()
            .val()
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let (d_x, d_y, rank, n_templates) = (4, 3, 2, 5);
        let mut logits = bias.clone();
        for m in 0..n_templates {
            for i in 0..d_y {
                logits[m] += y[i] * weight[i * n_templates + m];
            }
        }
        let sigma: Vec<f32> = match generator.mixing {
            Mixing::Tanh => logits.iter().map(|v| v.tanh()).collect(),
            Mixing::Softmax => {
                let max = logits.iter().cloned().fold(f32::MIN, f32::max);
                let exps: Vec<f32> = logits.iter().map(|v| (v - max).exp()).collect();
                let total: f32 = exps.iter().sum();
                exps.iter().map(|v| v / total).collect()
            }
        };
        let mut augmented = x.to_vec();
        augmented.push(1.0);
        let mut out = x.to_vec();
        for k in 0..rank {
            let mut u = 0.0;
            for j in 0..=d_x {
                let r: f32 = (0..n_templates)
                    .map(|m| sigma[m] * right[(m * (d_x + 1) + j) * rank + k])
                    .sum();
                u += r * augmented[j];
            }
            for i in 0..d_x {
                let l: f32 = (0..n_templates)
                    .map(|m| sigma[m] * left[(m * d_x + i) * rank + k])
                    .sum();
                out[i] += l * u;
            }
        }
        out
    }

    #[test]
    fn dynamic_and_frozen_match_plain_math() {
        let device = Default::default();
        for mixing in [Mixing::Tanh, Mixing::Softmax] {
            let generator = generator(mixing);
            let x = Tensor::<TestBackend, 3>::random(
                [2, 3, 4],
                Distribution::Normal(0.0, 1.0),
                &device,
            );
            let y = Tensor::<TestBackend, 3>::random(
                [2, 3, 3],
                Distribution::Normal(0.0, 1.0),
                &device,
            );
            let dynamic = generator
                .forward(x.clone(), y.clone())
                .into_data()
                .to_vec::<f32>()
                .unwrap();
            let xs = x.clone().into_data().to_vec::<f32>().unwrap();
            let ys = y.clone().into_data().to_vec::<f32>().unwrap();
            for b in 0..2 {
                for s in 0..3 {
                    let at = (b * 3 + s) * 4;
                    let expected = reference(
                        &generator,
                        &xs[at..at + 4],
                        &ys[(b * 3 + s) * 3..(b * 3 + s) * 3 + 3],
                    );
                    for i in 0..4 {
                        assert!((dynamic[at + i] - expected[i]).abs() < TEMPLATE_TOLERANCE);
                    }
                }
            }
            // Frozen: the context of position 1 broadcast over the sequence.
            let frozen_y = y.narrow(1, 1, 1);
            let frozen = generator
                .forward(x, frozen_y)
                .into_data()
                .to_vec::<f32>()
                .unwrap();
            for b in 0..2 {
                for s in 0..3 {
                    let at = (b * 3 + s) * 4;
                    let expected = reference(
                        &generator,
                        &xs[at..at + 4],
                        &ys[(b * 3 + 1) * 3..(b * 3 + 1) * 3 + 3],
                    );
                    for i in 0..4 {
                        assert!((frozen[at + i] - expected[i]).abs() < TEMPLATE_TOLERANCE);
                    }
                }
            }
        }
    }

    /// The direct form of the per-position operator: the factors `L(y_s)`, `R(y_s)` formed for every
    /// position, then `([x; 1] R(y_s)) L(y_s)^T` (the implementation before 2026-11-28).
    fn direct_form<B: Backend>(
        generator: &TemplateGenerator<B>,
        input: Tensor<B, 3>,
        context: Tensor<B, 3>,
    ) -> Tensor<B, 3> {
        let [batch_size, seq_length, d_x] = input.dims();
        let ones = Tensor::<B, 3>::ones([batch_size, seq_length, 1], &input.device());
        let augmented = Tensor::cat(vec![input.clone(), ones], 2);
        let (left, right) = generator.factors(context);
        let delta = augmented
            .unsqueeze_dim::<4>(2)
            .matmul(right)
            .matmul(left.swap_dims(2, 3))
            .reshape([batch_size, seq_length, d_x]);
        input + delta
    }

    /// The two forms sum the same products in another order; values are O(1) and each output sums
    /// M (d_x + 1) r = 42 products, so f32 reordering moves them by ~1e-6 of the largest entry.
    const REORDER_TOLERANCE: f32 = 1e-5;

    fn max_relative_gap<B: Backend>(a: Tensor<B, 3>, b: Tensor<B, 3>) -> f32 {
        use burn::tensor::ElementConversion;
        let scale = b.clone().abs().max().into_scalar().elem::<f32>().max(1.0);
        (a - b).abs().max().into_scalar().elem::<f32>() / scale
    }

    #[test]
    fn per_position_operator_matches_the_direct_form_in_values_and_gradients() {
        use burn::backend::Autodiff;
        type Train = Autodiff<TestBackend>;
        let device = Default::default();
        for mixing in [Mixing::Tanh, Mixing::Softmax] {
            let generator = TemplateGenerator::<Train>::new(6, 4, 2, 3, mixing, 0.5, &device);
            let normal = Distribution::Normal(0.0, 1.0);
            let x = Tensor::<TestBackend, 3>::random([3, 5, 6], normal, &device);
            let y = Tensor::<TestBackend, 3>::random([3, 5, 4], normal, &device);
            let weights = Tensor::<Train, 3>::random([3, 5, 6], normal, &device);
            let run = |form: &dyn Fn(Tensor<Train, 3>, Tensor<Train, 3>) -> Tensor<Train, 3>| {
                let x = Tensor::<Train, 3>::from_inner(x.clone()).require_grad();
                let y = Tensor::<Train, 3>::from_inner(y.clone()).require_grad();
                let out = form(x.clone(), y.clone());
                let grads = (out.clone() * weights.clone()).sum().backward();
                let param = |p: &Param<Tensor<Train, 3>>| p.val().grad(&grads).unwrap();
                let selector = generator.selector.weight.val().grad(&grads).unwrap();
                (
                    out.inner(),
                    vec![
                        x.grad(&grads).unwrap(),
                        y.grad(&grads).unwrap(),
                        param(&generator.left),
                        param(&generator.right),
                        selector.unsqueeze::<3>(),
                    ],
                )
            };
            let (ours, our_grads) = run(&|x, y| generator.forward(x, y));
            let (direct, direct_grads) = run(&|x, y| direct_form(&generator, x, y));
            let gap = max_relative_gap(ours, direct);
            assert!(
                gap < REORDER_TOLERANCE,
                "{mixing:?}: values differ by {gap}"
            );
            for (index, (a, b)) in our_grads.into_iter().zip(direct_grads).enumerate() {
                let gap = max_relative_gap(a, b);
                assert!(
                    gap < REORDER_TOLERANCE,
                    "{mixing:?}: gradient {index} differs by {gap}"
                );
            }
        }
    }

    #[test]
    fn affine_map_reproduces_the_operator() {
        let device = Default::default();
        let generator = generator(Mixing::Tanh);
        let x = Tensor::<TestBackend, 2>::random([5, 4], Distribution::Normal(0.0, 1.0), &device);
        let y = Tensor::<TestBackend, 1>::random([3], Distribution::Normal(0.0, 1.0), &device);
        let (matrix, offset) = generator.affine_map(y.clone());
        let folded = x.clone().matmul(matrix) + offset.unsqueeze::<2>();
        let direct = generator
            .forward(x.unsqueeze::<3>(), y.reshape([1, 1, 3]))
            .reshape([5, 4]);
        let diff = (folded - direct).abs().max().into_scalar();
        assert!(diff < TEMPLATE_TOLERANCE, "diff {diff}");
    }
}
