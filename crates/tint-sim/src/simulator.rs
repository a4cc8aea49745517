//! [`TintSimulator`]: the TinT network of docs/construction.md §4–§8 assembled from tint-ops modules.
//!
//! One call runs, on `[prefix rows + token rows]` states of width `Ds`: the simulated forward pass of
//! every auxiliary layer (§5), the loss-gradient module (§7), the backward + descent of the top
//! `n_simulation_layers` layers (§8), and the final forward pass with the updated prefix blocks;
//! repeated `n_forward_backward` times.
//!
//! The constructed weights of a module depend only on the TinT sizes and options, never on the
//! layer, so one instance of each module kind is kept and applied to every layer; the parameter
//! count ([`TintSimulator::num_params`]) still counts one copy per layer and step, the way the
//! official code allocates them (§11).

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::{
    layout, prefix, ActivationBackward, ActivationForward, AttentionBackprop, AttentionVariant,
    Derivative, DescentUpdate, LayerNormBackwardDescent, LinearBackwardDescent, LinearForward,
    NormForward, NormKind, QkvPrefixes, SelfAttentionBackwardDescent, SelfAttentionForward,
    SimContext, TintDims, TintOptions,
};

use crate::config::{DerivativeMode, TintConfig};
use crate::error::SimError;
use crate::family_step::{simulate, FinalPass, SimulatedFamily, StepFamily};
use crate::input::SimInput;
use crate::loss::head_logits;
use crate::params::{Activation, AuxDims, AuxParams, NormPlacement};
use crate::reference::{embed, SimOutput};
use crate::step_config::StepConfig;
use tint_ops::branches::map_in_order;
use tint_ops::mlp_chunk::structured_chunk_rows;

pub use crate::config::blocks_per_layer;

/// The forward-pass modules of one layer (docs/construction.md §5.2); shared by the MLP chunks.
#[derive(Module, Debug)]
pub struct ForwardBlock<B: Backend> {
    /// LayerNorm forward (used for ln_1 and ln_2).
    pub ln_1: NormForward<B>,
    /// Softmax self-attention forward.
    pub attention: SelfAttentionForward<B>,
    /// Attention output projection.
    pub attention_proj: LinearForward<B>,
    /// Second LayerNorm forward.
    pub ln_2: NormForward<B>,
    /// MLP input chunk.
    pub fc: LinearForward<B>,
    /// MLP activation.
    pub activation: ActivationForward<B>,
    /// MLP output chunk.
    pub proj: LinearForward<B>,
}

/// The backward + descent modules of one layer (docs/construction.md §8).
#[derive(Module, Debug)]
pub struct BackwardBlock<B: Backend> {
    /// MLP output chunk backward + descent.
    pub proj: LinearBackwardDescent<B>,
    /// Activation backward.
    pub activation: ActivationBackward<B>,
    /// MLP input chunk backward + descent.
    pub fc: LinearBackwardDescent<B>,
    /// ln_2 backward + bias descent.
    pub ln_2: LayerNormBackwardDescent<B>,
    /// Attention output projection backward + descent.
    pub attention_proj: LinearBackwardDescent<B>,
    /// Value-only attention backward + `W_V` descent.
    pub attention: SelfAttentionBackwardDescent<B>,
    /// ln_1 backward + bias descent.
    pub ln_1: LayerNormBackwardDescent<B>,
}

/// The final LayerNorm forward and its backward + descent (docs/construction.md §7).
#[derive(Module, Debug)]
pub struct GradientModule<B: Backend> {
    /// `ln_f` forward.
    pub forward: NormForward<B>,
    /// `ln_f` backward + bias descent.
    pub backward: LayerNormBackwardDescent<B>,
}

impl<B: Backend> ForwardBlock<B> {
    fn new(dims: &TintDims, options: &TintOptions, device: &B::Device) -> Result<Self, SimError> {
        let lin = Some(dims.linear_memory_index());
        Ok(Self {
            ln_1: NormForward::new(NormKind::Layer, dims, options, device)?,
            attention: SelfAttentionForward::new(
                dims,
                &AttentionVariant::multi_head(dims.n_heads_aux()),
                options,
                device,
            )?,
            attention_proj: LinearForward::new(dims, lin, options, device)?,
            ln_2: NormForward::new(NormKind::Layer, dims, options, device)?,
            fc: LinearForward::new(dims, lin, options, device)?,
            activation: ActivationForward::new(dims, options, device)?,
            proj: LinearForward::new(dims, lin, options, device)?,
        })
    }
}

impl<B: Backend> BackwardBlock<B> {
    /// `proj_bias_step_scale`: the bias step of each MLP output chunk (`1 / n_chunks` for the
    /// paper's step on the summed bias, 1 for the official code's, docs/construction.md §12 bug 1).
    fn new(
        dims: &TintDims,
        proj_bias_step_scale: f64,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, SimError> {
        let lin = dims.linear_memory_index();
        Ok(Self {
            proj: LinearBackwardDescent::with_bias_step_scale(
                dims,
                lin,
                DescentUpdate::WeightAndBias,
                proj_bias_step_scale,
                options,
                device,
            )?,
            activation: ActivationBackward::new(dims, options, device)?,
            fc: LinearBackwardDescent::new(
                dims,
                lin,
                DescentUpdate::WeightAndBias,
                options,
                device,
            )?,
            ln_2: LayerNormBackwardDescent::new(dims, options, device)?,
            attention_proj: LinearBackwardDescent::new(
                dims,
                lin,
                DescentUpdate::WeightAndBias,
                options,
                device,
            )?,
            attention: SelfAttentionBackwardDescent::new(
                dims,
                &AttentionVariant::multi_head(dims.n_heads_aux()),
                AttentionBackprop::ThroughAttention,
                options,
                device,
            )?,
            ln_1: LayerNormBackwardDescent::new(dims, options, device)?,
        })
    }
}

/// Everything a simulator is built from besides the constructed module weights.
#[derive(Debug, Clone)]
pub(crate) struct SimulatorParts<B: Backend> {
    pub config: TintConfig,
    pub aux_dims: AuxDims,
    pub activation: Activation,
    pub token_embedding: Tensor<B, 2>,
    pub position_embedding: Tensor<B, 2>,
    pub position_offset: usize,
    pub prefixes: Vec<Vec<Tensor<B, 3>>>,
    pub ln_f_prefix: Tensor<B, 3>,
}

/// How the auxiliary model's blocks and head are arranged beyond what [`SimulatorParts`] holds
/// (docs/construction.md §16): pre-LN with a final LayerNorm and the tied head (GPT-2, pre-LN OPT), or
/// post-LN OPT without a final LayerNorm and, with `project_out`, its own LM head.
#[derive(Debug, Clone)]
pub(crate) struct HeadLayout<B: Backend> {
    pub norm_placement: NormPlacement,
    /// Whether the `ln_f` block is applied (and trained).
    pub final_norm: bool,
    /// The LM head `[vocab_size, D]` when it is not the token embedding.
    pub lm_head: Option<Tensor<B, 2>>,
}

impl<B: Backend> HeadLayout<B> {
    /// GPT-2 / pre-LN OPT: what a saved simulator holds.
    fn pre_ln() -> Self {
        Self {
            norm_placement: NormPlacement::PreLn,
            final_norm: true,
            lm_head: None,
        }
    }

    fn is_pre_ln(&self) -> bool {
        self.norm_placement == NormPlacement::PreLn && self.final_norm && self.lm_head.is_none()
    }
}

/// The TinT simulator of an auxiliary model.
#[derive(Debug)]
pub struct TintSimulator<B: Backend> {
    config: TintConfig,
    dims: TintDims,
    aux_dims: AuxDims,
    activation: Activation,
    /// Token embeddings `[vocab_size, D]` (frozen, tied LM head).
    token_embedding: Tensor<B, 2>,
    /// Position embeddings `[n_positions, D]` (frozen).
    position_embedding: Tensor<B, 2>,
    position_offset: usize,
    /// Initial prefix blocks, `[layer][block]`, each `[1, P, Ds]`.
    prefixes: Vec<Vec<Tensor<B, 3>>>,
    /// `ln_f` prefix block `[1, P, Ds]` (zeros and never read without a final LayerNorm).
    ln_f_prefix: Tensor<B, 3>,
    head: HeadLayout<B>,
    forward_block: ForwardBlock<B>,
    backward_block: BackwardBlock<B>,
    gradient: GradientModule<B>,
}

/// Stored token-row activations of one layer (16 for 4 MLP chunks), in schedule order.
type LayerActs<B> = Vec<Tensor<B, 3>>;

fn transpose_weight<B: Backend>(w: Tensor<B, 3>) -> Tensor<B, 3> {
    w.swap_dims(1, 2)
}

fn squeeze_bias<B: Backend>(b: Tensor<B, 3>) -> Tensor<B, 2> {
    let [copies, _, d] = b.dims();
    b.reshape([copies, d])
}

impl<B: Backend> TintSimulator<B> {
    /// Constructs the simulator: validates `config` against the model (docs/construction.md §1.2), writes every
    /// layer's weights into prefix blocks (§2.5, §5.1) and builds the modules.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] / [`SimError::Ops`] for violated constraints,
    /// [`SimError::UnsupportedModel`] for weights TinT cannot hold.
    pub fn new(aux: &AuxParams<B>, config: TintConfig) -> Result<Self, SimError> {
        aux.check_shapes()?;
        config.validate(aux)?;
        if aux.layers.iter().any(|l| l.w_q.dims()[0] != 1) {
            return Err(SimError::UnsupportedModel(
                "the auxiliary weights carry per-sequence copies".into(),
            ));
        }
        let aux_dims = aux.dims();
        let dims = TintDims::new(
            aux_dims.d_model,
            aux_dims.n_heads,
            config.hidden_size,
            config.num_prefixes,
            config.num_heads,
            aux.max_seq_length(),
            aux.max_seq_length(),
        )?;
        let device = aux.device();
        let d = aux_dims.d_model;
        let n_chunks = aux_dims.d_inner / d;
        let ln_block = |ln: &crate::params::LayerNormParams<B>| {
            prefix::write_layer_norm(
                squeeze_bias(ln.gamma.clone()),
                squeeze_bias(ln.beta.clone()),
                &dims,
            )
        };
        let linear_block = |w: Tensor<B, 3>, b: Tensor<B, 3>| {
            prefix::write_linear(transpose_weight(w), squeeze_bias(b), &dims)
        };
        let mut prefixes = Vec::with_capacity(aux.layers.len());
        for layer in &aux.layers {
            let mut blocks = vec![
                ln_block(&layer.ln_1)?,
                linear_block(layer.w_q.clone(), layer.b_q.clone())?,
                linear_block(layer.w_k.clone(), layer.b_k.clone())?,
                linear_block(layer.w_v.clone(), layer.b_v.clone())?,
                linear_block(layer.w_o.clone(), layer.b_o.clone())?,
                ln_block(&layer.ln_2)?,
            ];
            for k in 0..n_chunks {
                let chunk = k * d..(k + 1) * d;
                blocks.push(linear_block(
                    layer.w_fc.clone().slice([0..1, 0..d, chunk.clone()]),
                    layer.b_fc.clone().slice([0..1, 0..1, chunk.clone()]),
                )?);
                blocks.push(Tensor::zeros(
                    [1, config.num_prefixes, config.hidden_size],
                    (&device, aux.dtype()),
                ));
                // Each chunk holds b_proj / n_chunks; the chunk outputs are summed (docs/construction.md §5.1).
                blocks.push(linear_block(
                    layer.w_proj.clone().slice([0..1, chunk, 0..d]),
                    layer.b_proj.clone().div_scalar(n_chunks as f64),
                )?);
            }
            prefixes.push(blocks);
        }
        let ln_f_prefix = match &aux.ln_f {
            Some(ln_f) => ln_block(ln_f)?,
            None => Tensor::zeros(
                [1, config.num_prefixes, config.hidden_size],
                (&device, aux.dtype()),
            ),
        };
        let head = HeadLayout {
            norm_placement: aux.norm_placement,
            final_norm: aux.ln_f.is_some(),
            lm_head: aux.lm_head.clone(),
        };
        let parts = SimulatorParts {
            config,
            aux_dims,
            activation: aux.activation,
            token_embedding: aux.token_embedding.clone(),
            position_embedding: aux.position_embedding.clone(),
            position_offset: aux.position_offset,
            prefixes,
            ln_f_prefix,
        };
        Self::from_parts_with(parts, head)
    }

    /// Builds the modules around saved prefix blocks of a pre-LN model with a tied head (what
    /// [`Self::save`] writes; [`Self::check_saveable`]).
    pub(crate) fn from_parts(parts: SimulatorParts<B>) -> Result<Self, SimError> {
        Self::from_parts_with(parts, HeadLayout::pre_ln())
    }

    /// Whether [`Self::save`] can write this simulator: the saved format holds pre-LN models with
    /// a tied head only.
    ///
    /// # Errors
    /// [`SimError::UnsupportedModel`] for a post-LN model, one without a final LayerNorm or one
    /// with its own LM head (OPT `project_out`).
    pub(crate) fn check_saveable(&self) -> Result<(), SimError> {
        if self.head.is_pre_ln() {
            Ok(())
        } else {
            Err(SimError::UnsupportedModel(format!(
                "saving a simulator of a {:?} model (final LayerNorm: {}, own LM head: {}): the saved \
                 format holds pre-LN models with a final LayerNorm and a tied head",
                self.head.norm_placement,
                self.head.final_norm,
                self.head.lm_head.is_some()
            )))
        }
    }

    /// Builds the modules around freshly written prefix blocks.
    fn from_parts_with(parts: SimulatorParts<B>, head: HeadLayout<B>) -> Result<Self, SimError> {
        let SimulatorParts {
            config,
            aux_dims,
            activation,
            token_embedding,
            position_embedding,
            position_offset,
            prefixes,
            ln_f_prefix,
        } = parts;
        config.validate_reference(aux_dims.n_layers)?;
        crate::config::check_mlp_width(&aux_dims)?;
        let max_seq_length = position_embedding.dims()[0].saturating_sub(position_offset);
        let dims = crate::param_count::tint_dims(&aux_dims, &config, max_seq_length)?;
        let dtype = token_embedding.dtype();
        let device = token_embedding.device();
        let options = tint_options(&config, activation, dtype);
        // The MLP output chunks share one bias: each chunk's descent takes 1/n_chunks of the bias
        // step so that the summed bias takes the paper's step; the official code gives each chunk
        // the full step (docs/construction.md §12 bug 1).
        let n_chunks = aux_dims.d_inner / aux_dims.d_model;
        let proj_bias_step_scale = if config.official_compat {
            1.0
        } else {
            1.0 / n_chunks as f64
        };
        Ok(Self {
            forward_block: ForwardBlock::new(&dims, &options, &device)?,
            backward_block: BackwardBlock::new(&dims, proj_bias_step_scale, &options, &device)?,
            gradient: GradientModule {
                forward: NormForward::new(NormKind::Layer, &dims, &options, &device)?,
                backward: LayerNormBackwardDescent::new(&dims, &options, &device)?,
            },
            config,
            dims,
            aux_dims,
            activation,
            token_embedding,
            position_embedding,
            position_offset,
            prefixes,
            ln_f_prefix,
            head,
        })
    }

    /// The pieces [`Self::from_parts`] needs (also what is saved).
    pub(crate) fn parts(&self) -> SimulatorParts<B> {
        SimulatorParts {
            config: self.config.clone(),
            aux_dims: self.aux_dims,
            activation: self.activation,
            token_embedding: self.token_embedding.clone(),
            position_embedding: self.position_embedding.clone(),
            position_offset: self.position_offset,
            prefixes: self.prefixes.clone(),
            ln_f_prefix: self.ln_f_prefix.clone(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TintConfig {
        &self.config
    }

    /// The validated TinT sizes (with `T = Tmax`).
    pub fn dims(&self) -> &TintDims {
        &self.dims
    }

    /// Sizes of the simulated auxiliary model.
    pub fn aux_dims(&self) -> AuxDims {
        self.aux_dims
    }

    fn n_chunks(&self) -> usize {
        self.aux_dims.d_inner / self.aux_dims.d_model
    }

    /// Number of parameters counted the way the official `TinT_Creator` counts them (docs/construction.md §11):
    /// embeddings, every prefix block, and every module weight, one module copy per layer (and per
    /// step unless blocks are reused).
    pub fn num_params(&self) -> usize {
        let (p, ds) = (self.dims.n_prefixes(), self.dims.d_sim());
        let n_layers = self.aux_dims.n_layers;
        let n_sim = self.config.simulated_layers(n_layers);
        let n_fb = self.config.step.n_forward_backward;
        let forward_modules = self.forward_block.num_params();
        let forward = forward_modules + blocks_per_layer(self.n_chunks()) * p * ds;
        let backward_copies = if self.config.reuse_backward_blocks {
            1
        } else {
            n_fb
        };
        let extra_forward = if self.config.reuse_forward_blocks {
            0
        } else {
            n_sim * n_fb * forward_modules
        };
        self.token_embedding.dims().iter().product::<usize>()
            + self.position_embedding.dims().iter().product::<usize>()
            + n_layers * forward
            + n_sim * backward_copies * self.backward_block.num_params()
            + self.gradient.num_params()
            + p * ds
            + extra_forward
    }

    /// Number of stored values the [`tint_ops::Execution::Constructed`] execution actually reads:
    /// the token and position embeddings, the LM head when it is not the token embedding (OPT
    /// `project_out`, docs/construction.md §16), every prefix block (`ln_f`'s included when the model has
    /// a final LayerNorm) and ONE copy of each constructed module kind (forward block, backward
    /// block, `ln_f` gradient module when there is a final LayerNorm) — a
    /// module's weights depend only on the TinT sizes and options, so one instance serves every
    /// layer and step, while [`Self::num_params`] counts a copy per layer and step as the official
    /// code allocates them.
    pub fn num_params_read(&self) -> usize {
        let (p, ds) = (self.dims.n_prefixes(), self.dims.d_sim());
        // Without a final LayerNorm (post-LN OPT, docs/construction.md §16) neither the `ln_f` block
        // nor the gradient module is read; a separate LM head (OPT `project_out`) is.
        let final_norm = usize::from(self.head.final_norm);
        let blocks = self.aux_dims.n_layers * blocks_per_layer(self.n_chunks()) + final_norm;
        self.token_embedding.dims().iter().product::<usize>()
            + self.position_embedding.dims().iter().product::<usize>()
            + self
                .head
                .lm_head
                .as_ref()
                .map_or(0, |h| h.dims().iter().product::<usize>())
            + blocks * p * ds
            + self.forward_block.num_params()
            + self.backward_block.num_params()
            + final_norm * self.gradient.num_params()
    }

    /// Runs the simulator.
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for inputs that do not match each other or the model.
    pub fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        input.validate(self.aux_dims.vocab_size, self.dims.max_seq_length())?;
        crate::sequences::forward_in_parallel(input, |input| simulate(self, input))
    }

    /// `t` (`[1, P, Ds]`) for a batch of `batch_size`.
    fn expand_prefix(&self, t: &Tensor<B, 3>, batch_size: usize) -> Tensor<B, 3> {
        t.clone()
            .expand([batch_size, self.dims.n_prefixes(), self.dims.d_sim()])
    }

    /// The index of the first simulated (updated) layer.
    fn first_simulated_layer(&self) -> usize {
        let n_layers = self.aux_dims.n_layers;
        n_layers - self.config.simulated_layers(n_layers)
    }

    /// The embeddings as an [`AuxParams`] without layers (for [`embed`]).
    fn aux_params_view(&self) -> AuxParams<B> {
        AuxParams {
            token_embedding: self.token_embedding.clone(),
            lm_head: None,
            position_embedding: self.position_embedding.clone(),
            position_offset: self.position_offset,
            layers: Vec::new(),
            ln_f: None,
            norm_placement: self.head.norm_placement,
            n_heads: self.aux_dims.n_heads,
            activation: self.activation,
        }
    }

    /// One simulated layer forward (docs/construction.md §5.2; post-LN §16) on the token rows; `keep`
    /// stores the 16 token activations (their memory regions), in the order
    /// `[ln_1, attention, attention c_proj, ln_2, (c_fc, activation, c_proj) per chunk]` whatever the
    /// norm placement.
    fn layer_forward(
        &self,
        tokens: Tensor<B, 3>,
        blocks: &[Tensor<B, 3>],
        ctx: &SimContext<B>,
        keep: bool,
    ) -> (Tensor<B, 3>, LayerActs<B>) {
        let fb = &self.forward_block;
        let p = self.dims.n_prefixes();
        let ds = self.dims.d_sim();
        let post_ln = self.head.norm_placement == NormPlacement::PostLn;
        let (ln_mem, attn_mem, lin_mem) = (
            self.dims.ln_memory_index(),
            self.dims.attn_memory_index(),
            self.dims.linear_memory_index(),
        );
        let stored =
            |s: &Tensor<B, 3>, mem: usize| keep.then(|| s.clone().narrow(2, mem, ds - mem));
        let residual = tokens.clone();
        // Pre-LN: ln_1 before the attention; post-LN: the attention reads the layer input, itself
        // a LayerNorm output (or the embeddings), of the same `[y, 0…0, memory]` form.
        let (attention_input, mut ln_1_act) = if post_ln {
            (tokens, None)
        } else {
            let a1 = fb.ln_1.forward_rows(blocks[0].clone(), tokens, ctx);
            let act = stored(&a1, ln_mem);
            (a1, act)
        };
        let qkv = QkvPrefixes {
            query: blocks[1].clone(),
            key: blocks[2].clone(),
            value: blocks[3].clone(),
        };
        // Softmax attention reads the whole state (its prefix rows are ignored).
        // A contiguous copy: a row range of a batched state is a 3-d strided view, which flex
        // copies element by element wherever it is read later (stored memory, `cat`).
        let at = layout::contiguous(layout::token_rows(
            fb.attention.forward(
                layout::join_rows(blocks[1].clone(), attention_input),
                &qkv,
                ctx,
            ),
            p,
        ));
        let at_act = stored(&at, attn_mem);
        let o = fb.attention_proj.forward_rows(blocks[4].clone(), at, ctx);
        let o_act = stored(&o, lin_mem);
        let h2 = add_rows(o, residual);
        // The MLP input: ln_2 (pre-LN) or ln_1 (post-LN) of the attention residual sum; the MLP
        // residual adds to the MLP input (post-LN) or to the sum (pre-LN).
        let (m, mut out, mut ln_2_act) = if post_ln {
            let m = fb.ln_1.forward_rows(blocks[0].clone(), h2, ctx);
            ln_1_act = stored(&m, ln_mem);
            (m.clone(), m, None)
        } else {
            let m = fb.ln_2.forward_rows(blocks[5].clone(), h2.clone(), ctx);
            let act = stored(&m, ln_mem);
            (m, h2, act)
        };
        // The `Di / D` MLP chunks are independent given `m` (on CPU backends parallel tasks,
        // `crate::branches`); their outputs are added in chunk order, as one loop would.
        let chunks = map_in_order::<B, _, _>(&m.device(), self.n_chunks(), |k| {
            // Structured: the chunk at the signal's width (the same values, two fewer `Ds`-wide rows).
            let prefixes = [&blocks[6 + 3 * k], &blocks[7 + 3 * k], &blocks[8 + 3 * k]];
            if let Some(rows) =
                structured_chunk_rows(&fb.fc, &fb.activation, &fb.proj, prefixes, &m, keep)
            {
                let acts = rows
                    .stored
                    .map_or([None, None, None], |stored| stored.map(Some));
                return (rows.output, acts);
            }
            let u = fb
                .fc
                .forward_rows(blocks[6 + 3 * k].clone(), m.clone(), ctx);
            // `u` is a LinearForward output: zero between its signal and its memory.
            let v =
                fb.activation
                    .forward_rows_zero_padded(blocks[7 + 3 * k].clone(), u.clone(), ctx);
            let y = fb
                .proj
                .forward_rows(blocks[8 + 3 * k].clone(), v.clone(), ctx);
            let acts = [
                stored(&u, lin_mem),
                stored(&v, lin_mem),
                stored(&y, lin_mem),
            ];
            (y, acts)
        });
        let mut chunk_acts = Vec::new();
        for (y, acts) in chunks {
            chunk_acts.extend(acts.into_iter().flatten());
            out = add_rows(out, y);
        }
        if post_ln {
            out = fb.ln_2.forward_rows(blocks[5].clone(), out, ctx);
            ln_2_act = stored(&out, ln_mem);
        }
        let acts = [ln_1_act, at_act, o_act, ln_2_act]
            .into_iter()
            .flatten()
            .chain(chunk_acts)
            .collect();
        (out, acts)
    }

    /// One simulated layer backward + descent (docs/construction.md §8; post-LN §16) on the token rows:
    /// returns the gradient token rows at the layer input and the updated prefix blocks.
    fn layer_backward(
        &self,
        delta: Tensor<B, 3>,
        blocks: &[Tensor<B, 3>],
        acts: &LayerActs<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 3>>) {
        let bb = &self.backward_block;
        let p = self.dims.n_prefixes();
        let post_ln = self.head.norm_placement == NormPlacement::PostLn;
        let (ln_mem, attn_mem, lin_mem) = (
            self.dims.ln_memory_index(),
            self.dims.attn_memory_index(),
            self.dims.linear_memory_index(),
        );
        // Token rows with the stored activation written into the memory (before every backward
        // module, §8). Written over a copy of the (contiguous) token rows: a `cat` would first copy
        // the column view `[0, mem)` with flex's tiled strided copy, several times slower than the
        // whole-buffer memcpy (issue 17).
        let prepare = |tokens: Tensor<B, 3>, mem: usize, act: &Tensor<B, 3>| {
            layout::with_token_memory(tokens, 0, mem, act.clone())
        };
        let mut new_blocks = blocks.to_vec();
        let n_chunks = self.n_chunks();
        // Post-LN: the block ends with ln_2 after the MLP residual add; its backward + bias
        // descent comes first and gives the gradient at the MLP output and its residual.
        let delta = if post_ln {
            let (block, st) =
                bb.ln_2
                    .forward_rows(blocks[5].clone(), prepare(delta, ln_mem, &acts[3]), ctx);
            new_blocks[5] = block;
            st
        } else {
            delta
        };
        // Activations per layer: [a1, at, o, m, (u_k, v_k, y_k) per chunk].
        // The chunks are independent given `delta` (parallel tasks on CPU backends); their input
        // gradients are summed from the last chunk down, as one loop would.
        let chunks = map_in_order::<B, _, _>(&delta.device(), n_chunks, |i| {
            let k = n_chunks - 1 - i;
            let (u_act, v_act, y_act) = (&acts[4 + 3 * k], &acts[5 + 3 * k], &acts[6 + 3 * k]);
            let (proj_block, st) = bb.proj.forward_rows(
                blocks[8 + 3 * k].clone(),
                prepare(delta.clone(), lin_mem, y_act),
                ctx,
            );
            let st = bb.activation.forward_rows(prepare(st, lin_mem, v_act), ctx);
            let (fc_block, st) =
                bb.fc
                    .forward_rows(blocks[6 + 3 * k].clone(), prepare(st, lin_mem, u_act), ctx);
            (k, proj_block, fc_block, st)
        });
        let mut dm: Option<Tensor<B, 3>> = None;
        for (k, proj_block, fc_block, st) in chunks {
            new_blocks[8 + 3 * k] = proj_block;
            new_blocks[6 + 3 * k] = fc_block;
            dm = Some(match dm {
                Some(sum) => add_rows(sum, st),
                None => st,
            });
        }
        let dm = dm.unwrap_or_else(|| delta.zeros_like());
        // The gradient at the attention residual sum: through ln_2 (pre-LN) or, post-LN, through
        // ln_1 of the MLP input's total gradient (MLP path + residual).
        let delta_mid = if post_ln {
            let (block, st) = bb.ln_1.forward_rows(
                blocks[0].clone(),
                prepare(add_rows(dm, delta), ln_mem, &acts[0]),
                ctx,
            );
            new_blocks[0] = block;
            st
        } else {
            let (block, st) =
                bb.ln_2
                    .forward_rows(blocks[5].clone(), prepare(dm, ln_mem, &acts[3]), ctx);
            new_blocks[5] = block;
            add_rows(st, delta)
        };
        let (block, st) = bb.attention_proj.forward_rows(
            blocks[4].clone(),
            prepare(delta_mid.clone(), lin_mem, &acts[2]),
            ctx,
        );
        new_blocks[4] = block;
        // The value-only attention backward reads the whole state.
        let state = bb.attention.forward(
            layout::join_rows(blocks[3].clone(), prepare(st, attn_mem, &acts[1])),
            ctx,
        );
        new_blocks[3] = layout::prefix_rows(state.clone(), p);
        let st = layout::contiguous(layout::token_rows(state, p));
        if post_ln {
            return (add_rows(st, delta_mid), new_blocks);
        }
        let (block, st) =
            bb.ln_1
                .forward_rows(blocks[0].clone(), prepare(st, ln_mem, &acts[0]), ctx);
        new_blocks[0] = block;
        (add_rows(st, delta_mid), new_blocks)
    }
}

/// The GPT-2 / OPT family in the shared simulated step: the state is the token rows `[x_t, 0, …]`
/// (every module reads the prefix block it needs directly, its `forward_rows`, so the
/// `[P + T, Ds]` state is never rebuilt between modules); LayerNorm (pre- or post-LN, §16) and
/// `ln_f`, whose bias the step also descends.
impl<B: Backend> StepFamily<B> for TintSimulator<B> {
    type Context = SimContext<B>;
    type State = Tensor<B, 3>;
    /// The layer's prefix blocks in schedule order (`blocks_per_layer`).
    type LayerWeights = Vec<Tensor<B, 3>>;
    /// `ln_f`'s prefix block.
    type FinalWeights = Tensor<B, 3>;
    type LayerActs = LayerActs<B>;
    /// Token rows after `ln_f` (`[h_f, 0, …, f(x), x]`).
    type FinalState = Tensor<B, 3>;

    fn head_matrix(&self) -> Tensor<B, 2> {
        self.head
            .lm_head
            .as_ref()
            .unwrap_or(&self.token_embedding)
            .clone()
    }

    fn forward_layer(
        &self,
        state: Tensor<B, 3>,
        prefixes: &Vec<Tensor<B, 3>>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, LayerActs<B>) {
        self.layer_forward(state, prefixes, ctx, true)
    }

    fn final_norm(
        &self,
        state: Tensor<B, 3>,
        final_prefix: &Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> FinalPass<B, Tensor<B, 3>> {
        let tokens = if self.head.final_norm {
            self.gradient
                .forward
                .forward_rows(final_prefix.clone(), state, ctx)
        } else {
            state
        };
        let hf = layout::contiguous(tokens.clone().narrow(2, 0, self.dims.d_model()));
        let logits = head_logits(hf.clone(), &self.head_matrix());
        FinalPass {
            state: tokens,
            hf,
            logits,
        }
    }

    /// The loss gradient into the token signal (the `ln_f` memory is already in place), then
    /// `ln_f`'s backward + bias descent.
    fn final_backward(
        &self,
        grad: Tensor<B, 3>,
        final_state: &Tensor<B, 3>,
        final_prefix: &mut Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let (d, ds) = (self.dims.d_model(), self.dims.d_sim());
        let signal = Tensor::cat(vec![grad, final_state.clone().narrow(2, d, ds - d)], 2);
        if !self.head.final_norm {
            return signal;
        }
        let (new_ln_f, delta) =
            self.gradient
                .backward
                .forward_rows(final_prefix.clone(), signal, ctx);
        *final_prefix = new_ln_f;
        delta
    }

    /// Every layer descends its `ln_1` bias, the lowest one too: its input gradient is computed
    /// on the way (`index` is not used).
    fn backward_layer(
        &self,
        delta: Tensor<B, 3>,
        prefixes: &mut Vec<Tensor<B, 3>>,
        acts: &LayerActs<B>,
        ctx: &SimContext<B>,
        _index: usize,
    ) -> Tensor<B, 3> {
        let (out, new_blocks) = self.layer_backward(delta, prefixes, acts, ctx);
        *prefixes = new_blocks;
        out
    }
}

impl<B: Backend> SimulatedFamily<B> for TintSimulator<B> {
    fn dims(&self) -> &TintDims {
        &self.dims
    }

    fn step(&self) -> &StepConfig {
        &self.config.step
    }

    fn official_compat(&self) -> bool {
        self.config.official_compat
    }

    fn lower_state(
        &self,
        input: &SimInput<B>,
        dims: &TintDims,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let batch_size = input.dims()[0];
        let (d, ds) = (dims.d_model(), dims.d_sim());
        let embeddings = embed(&self.aux_params_view(), input);
        let mut tokens = layout::cat_columns(vec![(Some(embeddings), d), (None, ds - d)]);
        for blocks in &self.prefixes[..self.first_simulated_layer()] {
            let blocks: Vec<Tensor<B, 3>> = blocks
                .iter()
                .map(|t| self.expand_prefix(t, batch_size))
                .collect();
            tokens = self.layer_forward(tokens, &blocks, ctx, false).0;
        }
        tokens
    }

    fn top_prefixes(&self, batch_size: usize) -> (Vec<Vec<Tensor<B, 3>>>, Tensor<B, 3>) {
        let prefixes = self.prefixes[self.first_simulated_layer()..]
            .iter()
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|t| self.expand_prefix(t, batch_size))
                    .collect()
            })
            .collect();
        (prefixes, self.expand_prefix(&self.ln_f_prefix, batch_size))
    }
}

/// `a + b`, each operand first made contiguous ([`layout::contiguous`]: one memcpy for a row- or
/// column-range view, nothing for a contiguous tensor). The constructed modules return their token
/// rows as row-range views of the `[P + T, Ds]` state, which flex does not treat as contiguous
/// (even at batch size 1), so a plain `+` on them (or on a column range `[0, D)`) walks both
/// operands element by element (about 13 % of the GPT-2 constructed step, docs/performance.md
/// "Changes of 2026-11-25"). The same float additions, bit for bit. Shared by the GPT-2 and the
/// LLaMA simulators.
///
/// # Shapes
/// * `a`, `b`: `[batch_size, rows, width]` → `[batch_size, rows, width]`
pub(crate) fn add_rows<B: Backend>(a: Tensor<B, 3>, b: Tensor<B, 3>) -> Tensor<B, 3> {
    layout::contiguous(a) + layout::contiguous(b)
}

/// The tint-ops options for a configuration.
pub(crate) fn tint_options(
    config: &TintConfig,
    activation: Activation,
    dtype: burn::tensor::DType,
) -> TintOptions {
    TintOptions {
        float_dtype: dtype,
        gate_mode: config.gate_mode,
        gate_scale: config.gate_scale,
        execution: config.execution,
        derivative: match config.step.derivatives {
            DerivativeMode::FiniteDifference => Derivative::FiniteDifference {
                scale: config.step.scale_embeddings,
            },
            DerivativeMode::Exact => Derivative::Exact,
        },
        ln_epsilon: config.epsilon,
        inner_lr: config.step.inner_lr,
        activation: activation.kind(),
    }
}
