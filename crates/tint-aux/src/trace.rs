//! Intermediate activations of a forward pass, as the TinT construction needs them
//! (docs/construction.md §9.1).

use burn::tensor::{backend::Backend, Tensor};

/// The activations of one decoder block.
///
/// Names follow the pre-LN block `h_mid = h_in + Attn(LN1(h_in))`, `h_out = h_mid + W_proj act(LN2(h_mid) W_fc)`.
/// For a post-LN block (OPT with `do_layer_norm_before = false`) the sublayers read the residual
/// stream directly: `h_mid` is `LN1(h_in + Attn(h_in))`, `ln1_output` equals `h_mid`, `ln2_output` equals
/// `block_output = LN2(h_mid + MLP(h_mid))`, and the MLP reads `h_mid`.
#[derive(Debug, Clone)]
pub struct LayerTrace<B: Backend> {
    /// Block input `h_in`, `[batch_size, seq_length, d_model]`.
    pub block_input: Tensor<B, 3>,
    /// `LN1(h_in)` (pre-LN: the attention input), `[batch_size, seq_length, d_model]`.
    pub ln1_output: Tensor<B, 3>,
    /// Attention probabilities, `[batch_size, n_heads, seq_length, seq_length]`.
    pub attn_probs: Tensor<B, 4>,
    /// Attention output before the output projection, heads concatenated,
    /// `[batch_size, seq_length, d_model]`.
    pub attn_context: Tensor<B, 3>,
    /// Attention output after the output projection, `[batch_size, seq_length, d_model]`.
    pub attn_output: Tensor<B, 3>,
    /// Residual stream after the attention sublayer, `[batch_size, seq_length, d_model]`.
    pub h_mid: Tensor<B, 3>,
    /// `LN2(h_mid)` (pre-LN: the MLP input), `[batch_size, seq_length, d_model]`.
    pub ln2_output: Tensor<B, 3>,
    /// MLP pre-activation `u = m W_fc + b_fc`, `[batch_size, seq_length, d_ff]`.
    pub mlp_pre_activation: Tensor<B, 3>,
    /// MLP activation `v = act(u)`, `[batch_size, seq_length, d_ff]`.
    pub mlp_activation: Tensor<B, 3>,
    /// MLP output `v W_proj + b_proj`, `[batch_size, seq_length, d_model]`.
    pub mlp_output: Tensor<B, 3>,
    /// Block output (input of the next block), `[batch_size, seq_length, d_model]`.
    pub block_output: Tensor<B, 3>,
}

/// The activations of a whole forward pass.
#[derive(Debug, Clone)]
pub struct ForwardTrace<B: Backend> {
    /// Next-token logits, `[batch_size, seq_length, vocab_size]`.
    pub logits: Tensor<B, 3>,
    /// Per-block activations, bottom to top; `layers[0].block_input` is the embedding output.
    pub layers: Vec<LayerTrace<B>>,
    /// Output of the last block `h_L` (before the final LayerNorm), `[batch_size, seq_length, d_model]`.
    pub final_hidden: Tensor<B, 3>,
    /// After the final LayerNorm `hf = LNf(h_L)` (equal to `final_hidden` for models without one),
    /// `[batch_size, seq_length, d_model]`.
    pub final_normed: Tensor<B, 3>,
}

impl<B: Backend> ForwardTrace<B> {
    /// The trace of a forward whose blocks gave `layers`, the last block's output `final_hidden`
    /// and the final norm's output `final_normed`; the logits are `head(final_normed)`.
    ///
    /// # Shapes
    /// - `final_hidden`, `final_normed`: `[batch_size, seq_length, d_model]`
    /// - `head`: `[batch_size, seq_length, d_model]` → `[batch_size, seq_length, vocab_size]`
    pub(crate) fn with_head(
        (layers, final_hidden, final_normed): (Vec<LayerTrace<B>>, Tensor<B, 3>, Tensor<B, 3>),
        head: impl FnOnce(Tensor<B, 3>) -> Tensor<B, 3>,
    ) -> Self {
        Self {
            logits: head(final_normed.clone()),
            layers,
            final_hidden,
            final_normed,
        }
    }
}
