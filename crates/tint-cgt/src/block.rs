//! Transformer blocks: the plain/guided x-only block ([`XBlock`]) and the two-stream block ([`DualBlock`]).

use burn::module::Module;
use burn::nn::{LayerNorm, LayerNormConfig};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use crate::attention::CausalSelfAttention;
use crate::config::CgtConfig;
use crate::mlp::Mlp;
use crate::template::TemplateGenerator;

/// A pre-norm GPT-2 block on `x` alone:
/// `x <- x + attn(T_a(ln_1(x); y))`, `x <- x + mlp(T_m(ln_2(x); y))`, where the operators `T` exist only
/// above the readout layer (they are absent in the baseline, in the `x` part of two-stream blocks and in
/// folded models).
#[derive(Module, Debug)]
pub struct XBlock<B: Backend> {
    /// Norm before attention.
    pub norm_attn: LayerNorm<B>,
    /// Self-attention on `x`.
    pub attn: CausalSelfAttention<B>,
    /// Norm before the MLP.
    pub norm_mlp: LayerNorm<B>,
    /// MLP on `x`.
    pub mlp: Mlp<B>,
    /// Operator applied to the attention input.
    pub template_attn: Option<TemplateGenerator<B>>,
    /// Operator applied to the MLP input.
    pub template_mlp: Option<TemplateGenerator<B>>,
}

impl<B: Backend> XBlock<B> {
    /// Creates a block; `guided` adds the two template generators.
    pub fn new(config: &CgtConfig, guided: bool, device: &B::Device) -> Self {
        let d_x = config.d_x;
        let template = || TemplateGenerator::for_config(config, device);
        Self {
            norm_attn: LayerNormConfig::new(d_x).init(device),
            attn: CausalSelfAttention::new(d_x, d_x, config.n_heads_x, config.init_std, device),
            norm_mlp: LayerNormConfig::new(d_x).init(device),
            mlp: Mlp::new(d_x, config.mlp_ratio * d_x, d_x, config.init_std, device),
            template_attn: guided.then(template),
            template_mlp: guided.then(template),
        }
    }

    /// # Shapes
    /// - `x`: `[batch_size, seq_length, d_x]`
    /// - `context`: `[batch_size, seq_length or 1, d_y]`, used only by guided blocks
    /// - `bias`: `[batch_size or 1, 1, seq_length, seq_length]`
    /// - output: `[batch_size, seq_length, d_x]`
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        context: Option<&Tensor<B, 3>>,
        bias: Tensor<B, 4>,
    ) -> Tensor<B, 3> {
        let modulate =
            |h: Tensor<B, 3>, template: &Option<TemplateGenerator<B>>| match (template, context) {
                (Some(template), Some(context)) => template.forward(h, context.clone()),
                _ => h,
            };
        let h = modulate(self.norm_attn.forward(x.clone()), &self.template_attn);
        let x = x + self.attn.forward(h, bias);
        let h = modulate(self.norm_mlp.forward(x.clone()), &self.template_mlp);
        x.clone() + self.mlp.forward(h)
    }
}

/// A block at or below the readout layer carrying both streams.
///
/// The `x` half is an ordinary [`XBlock`] that never reads `y`; the `y` heads and `y` MLP read `[x, y]`
/// and write only into `y`. Norms are separate for the two streams.
#[derive(Module, Debug)]
pub struct DualBlock<B: Backend> {
    /// The `x` half (no templates).
    pub x_block: XBlock<B>,
    /// Norm of `y` before attention.
    pub y_norm_attn: LayerNorm<B>,
    /// `y` heads: q/k/v from `[ln(x), ln(y)]`, output into `y`.
    pub y_attn: CausalSelfAttention<B>,
    /// Norm of `y` before the MLP.
    pub y_norm_mlp: LayerNorm<B>,
    /// `y` MLP reading `[ln(x), ln(y)]`.
    pub y_mlp: Mlp<B>,
}

impl<B: Backend> DualBlock<B> {
    /// Creates a two-stream block.
    pub fn new(config: &CgtConfig, device: &B::Device) -> Self {
        let (d_x, d_y) = (config.d_x, config.d_y);
        Self {
            x_block: XBlock::new(config, false, device),
            y_norm_attn: LayerNormConfig::new(d_y).init(device),
            y_attn: CausalSelfAttention::new(
                d_x + d_y,
                d_y,
                config.n_heads_y,
                config.init_std,
                device,
            ),
            y_norm_mlp: LayerNormConfig::new(d_y).init(device),
            y_mlp: Mlp::new(
                d_x + d_y,
                config.mlp_ratio * d_y,
                d_y,
                config.init_std,
                device,
            ),
        }
    }

    /// # Shapes
    /// - `x`: `[batch_size, seq_length, d_x]`
    /// - `y`: `[batch_size, seq_length, d_y]`
    /// - `bias`: `[batch_size or 1, 1, seq_length, seq_length]`
    /// - output: `(x, y)` with the input shapes
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        y: Tensor<B, 3>,
        bias: Tensor<B, 4>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let block = &self.x_block;
        let hx = block.norm_attn.forward(x.clone());
        let hy = self.y_norm_attn.forward(y.clone());
        let y = y + self
            .y_attn
            .forward(Tensor::cat(vec![hx.clone(), hy], 2), bias.clone());
        let x = x + block.attn.forward(hx, bias);
        let hx = block.norm_mlp.forward(x.clone());
        let hy = self.y_norm_mlp.forward(y.clone());
        let y = y.clone() + self.y_mlp.forward(Tensor::cat(vec![hx.clone(), hy], 2));
        let x = x.clone() + block.mlp.forward(hx);
        (x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention_bias;
    use crate::tests::TestBackend;
    use burn::tensor::Distribution;

    /// The x half never reads y: identical arithmetic, so outputs agree bit for bit.
    const INDEPENDENCE_TOLERANCE: f32 = 0.0;

    #[test]
    fn x_output_ignores_y_and_matches_the_plain_block() {
        let device = Default::default();
        let config = CgtConfig::new(10, 8, 2, 8, 2)
            .with_d_y(4)
            .with_n_heads_y(2)
            .with_readout_layer(1)
            .with_init_std(0.3);
        let block = DualBlock::<TestBackend>::new(&config, &device);
        let x =
            Tensor::<TestBackend, 3>::random([2, 5, 8], Distribution::Normal(0.0, 1.0), &device);
        let y =
            Tensor::<TestBackend, 3>::random([2, 5, 4], Distribution::Normal(0.0, 1.0), &device);
        let bias = attention_bias::<TestBackend>(5, None, &device);
        let (x1, y1) = block.forward(x.clone(), y.clone(), bias.clone());
        let (x2, y2) = block.forward(x.clone(), y.mul_scalar(-3.0).add_scalar(2.0), bias.clone());
        assert!((x1.clone() - x2).abs().max().into_scalar() <= INDEPENDENCE_TOLERANCE);
        assert!((y1 - y2).abs().max().into_scalar() > 1e-3);
        let plain = block.x_block.forward(x, None, bias);
        assert!((x1 - plain).abs().max().into_scalar() <= INDEPENDENCE_TOLERANCE);
    }
}
