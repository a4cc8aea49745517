//! [`LlamaSimulator`]: the TinT network for a LLaMA-family auxiliary model (RMSNorm, rotary GQA
//! attention, SwiGLU, tied or untied head), assembled from tint-ops modules.
//!
//! One call runs, on `[prefix rows + token rows]` states of width `Ds`: the simulated forward pass
//! of every auxiliary layer, the final RMSNorm and the loss gradient (docs/construction.md §7, with the LM head
//! rows: the tied embedding or the untied head), the backward + descent of the top
//! `n_simulation_layers` layers (top → first: MLP half, then attention half), and the final forward
//! pass with the updated prefix blocks; repeated `n_forward_backward` times. It computes what
//! [`super::LlamaReference`] computes (docs/tint-llama.md). The structured execution with exact gates
//! runs the layers below the first simulated one as plain blocks on the token columns, with the
//! weights read out of their prefix blocks at construction (docs/construction.md §15).
//!
//! As in the GPT-2 simulator, one instance of each module kind is applied to every layer; the
//! parameter count ([`LlamaSimulator::num_params`]) counts one copy per layer and step.

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};
use serde::{Deserialize, Serialize};
use tint_aux::AuxModel;
use tint_ops::dims::MAX_POSITION_EMBEDDINGS;
use tint_ops::{layout, prefix, AttentionVariant, Derivative, SimContext, TintDims, TintOptions};
use tint_ops::{NormBackward, NormForward, NormKind};

use super::attention_half::{
    AttentionHalfActs, AttentionPrefixes, AttentionWeights, SimulatedAttentionHalf,
};
use super::config::LlamaTintConfig;
use super::mlp_block::SwiGluPrefixes;
use super::mlp_half::{MlpHalfActs, SimulatedMlpHalf};
use super::params::{LlamaLayerParams, LlamaParams};
use super::reference::LlamaReference;
use crate::config::{
    DerivativeMode, Execution, GateMode, TintConfig, TintSizes, DEFAULT_GATE_SCALE,
};
use crate::error::SimError;
use crate::family_step::{simulate, FinalPass, SimulatedFamily, StepFamily};
use crate::input::SimInput;
use crate::loss::head_logits;
use crate::reference::SimOutput;
use crate::step_config::StepConfig;

/// TinT sizes and step hyper-parameters of a [`LlamaSimulator`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaSimulatorConfig {
    /// What the simulated step does (layers, steps, `η`, `s`, loss gradient, derivatives, updates).
    pub step: LlamaTintConfig,
    /// TinT width `Ds`.
    pub hidden_size: usize,
    /// Prefix rows `P`.
    pub num_prefixes: usize,
    /// Softmax heads `Hs` (head size `Ds / Hs`).
    pub num_heads: usize,
    /// Longest simulated sequence `Tmax`; `None`: the model's positions, capped so that
    /// `P + Tmax <= 2048` (docs/construction.md §1.2 rule 6).
    pub max_seq_length: Option<usize>,
    /// How the simulator evaluates its constructed network. Default: [`Execution::Constructed`].
    #[serde(default)]
    pub execution: Execution,
    /// Gate evaluation. Default: [`GateMode::Exact`].
    #[serde(default)]
    pub gate_mode: GateMode,
    /// Gate logit scale `g10`. Default: 10.
    #[serde(default = "default_gate_scale")]
    pub gate_scale: f64,
}

fn default_gate_scale() -> f64 {
    DEFAULT_GATE_SCALE
}

impl LlamaSimulatorConfig {
    /// The sizes and shared step fields of a GPT-2-style [`TintConfig`] (its `epsilon` is not used:
    /// the RMSNorm epsilon is the model's).
    pub fn from_tint(config: &TintConfig) -> Self {
        Self {
            step: LlamaTintConfig::from_tint(config),
            hidden_size: config.hidden_size,
            num_prefixes: config.num_prefixes,
            num_heads: config.num_heads,
            max_seq_length: None,
            execution: config.execution,
            gate_mode: config.gate_mode,
            gate_scale: config.gate_scale,
        }
    }

    /// The sizes of [`TintConfig::sized_for`] (the one sizing rule) for a model of width `d_model`
    /// with `n_heads` heads, and `step`; every other field at its default.
    pub fn for_model(d_model: usize, n_heads: usize, step: LlamaTintConfig) -> Self {
        let sized = TintConfig::sized_for(d_model, n_heads, TintSizes::default());
        Self {
            step,
            hidden_size: sized.hidden_size,
            num_prefixes: sized.num_prefixes,
            num_heads: sized.num_heads,
            max_seq_length: None,
            execution: Execution::Constructed,
            gate_mode: GateMode::Exact,
            gate_scale: DEFAULT_GATE_SCALE,
        }
    }
}

/// The prefix blocks of one simulated layer, each `[batch_size, P, Ds]`.
#[derive(Debug, Clone)]
pub(crate) struct LayerPrefixes<B: Backend> {
    attention: AttentionPrefixes<B>,
    mlp_norm: Tensor<B, 3>,
    mlp: SwiGluPrefixes<B>,
}

impl<B: Backend> LayerPrefixes<B> {
    fn map(&self, f: impl Fn(&Tensor<B, 3>) -> Tensor<B, 3>) -> Self {
        let a = &self.attention;
        let all = |v: &[Tensor<B, 3>]| v.iter().map(&f).collect();
        Self {
            attention: AttentionPrefixes {
                norm: f(&a.norm),
                query: f(&a.query),
                key: f(&a.key),
                value: f(&a.value),
                output: f(&a.output),
            },
            mlp_norm: f(&self.mlp_norm),
            mlp: SwiGluPrefixes {
                gate: all(&self.mlp.gate),
                up: all(&self.mlp.up),
                down: all(&self.mlp.down),
            },
        }
    }
}

/// Stored memories of one simulated layer.
#[derive(Debug, Clone)]
pub(crate) struct LayerActs<B: Backend> {
    attention: AttentionHalfActs<B>,
    mlp: MlpHalfActs<B>,
}

/// The state after the final RMSNorm and its stored memory (what its backward reads).
pub(crate) struct FinalNormState<B: Backend> {
    /// `[batch_size, P + T, Ds]`.
    state: Tensor<B, 3>,
    /// The token rows' memory of the norm's input.
    act: Tensor<B, 3>,
}

/// The TinT simulator of a LLaMA-family auxiliary model.
#[derive(Debug)]
pub struct LlamaSimulator<B: Backend> {
    config: LlamaSimulatorConfig,
    dims: TintDims,
    /// Weights, hyper-parameters and input validation of the auxiliary model.
    reference: LlamaReference<B>,
    /// LM head rows `[vocab_size, D]` (frozen).
    head_rows: Tensor<B, 2>,
    /// The layers below the first simulated one.
    lower: LowerLayers<B>,
    /// Initial prefix blocks of the simulated layers, each `[1, P, Ds]`.
    top: Vec<LayerPrefixes<B>>,
    /// Final RMSNorm prefix block `[1, P, Ds]`.
    final_norm_prefix: Tensor<B, 3>,
    attention: SimulatedAttentionHalf<B>,
    mlp: SimulatedMlpHalf<B>,
    final_norm_forward: NormForward<B>,
    final_norm_backward: NormBackward<B>,
}

/// The layers below the first simulated one (no step updates them).
#[derive(Debug)]
enum LowerLayers<B: Backend> {
    /// Their initial prefix blocks, each `[1, P, Ds]`, run as simulated layers.
    Simulated(Vec<LayerPrefixes<B>>),
    /// The weights their prefix blocks held, read out of them once at construction, run as plain
    /// blocks on the token columns (the structured execution with exact gates; the blocks
    /// themselves are not kept: nothing else reads them).
    Plain(Vec<LlamaLayerParams<B>>),
}

/// The weights one layer's prefix blocks hold (batch 1, as built), as plain block weights:
/// `[in, out]` matrices, the SwiGLU chunk padding dropped (`d_ff` columns kept), the RMSNorm gains
/// read off the diagonal of their `(diag(gain), 0)` blocks.
///
/// # Errors
/// [`SimError::Ops`] for malformed blocks.
fn read_layer<B: Backend>(
    blocks: &LayerPrefixes<B>,
    attention: &SimulatedAttentionHalf<B>,
    mlp: &SimulatedMlpHalf<B>,
    dims: &TintDims,
    d_ff: usize,
) -> Result<LlamaLayerParams<B>, SimError> {
    let d = dims.d_model();
    let matrix = |t: Tensor<B, 3>| t.squeeze_dim::<2>(0);
    let norm = &blocks.mlp_norm;
    let eye = Tensor::<B, 2>::eye(d, &norm.device()).cast(norm.dtype());
    let gain = |block: &Tensor<B, 3>| -> Result<Tensor<B, 1>, SimError> {
        let diag = matrix(prefix::read_linear(block.clone(), dims)?.0);
        Ok((diag * eye.clone()).sum_dim(1).reshape([d]))
    };
    let attention_weights = attention.read_weights(&blocks.attention)?;
    let mlp_weights = mlp.mlp.read_weights(&blocks.mlp)?;
    Ok(LlamaLayerParams {
        attn_norm: gain(&blocks.attention.norm)?,
        w_q: matrix(attention_weights.w_q),
        w_k: matrix(attention_weights.w_k),
        w_v: matrix(attention_weights.w_v),
        w_o: matrix(attention_weights.w_o),
        mlp_norm: gain(&blocks.mlp_norm)?,
        w_gate: matrix(mlp_weights.w_gate.narrow(2, 0, d_ff)),
        w_up: matrix(mlp_weights.w_up.narrow(2, 0, d_ff)),
        w_down: matrix(mlp_weights.w_down.narrow(1, 0, d_ff)),
    })
}

/// The tint-ops options of a LLaMA simulator: the model's RMSNorm epsilon, the configured
/// execution and gates.
fn tint_options(config: &LlamaSimulatorConfig, rms_eps: f64, dtype: DType) -> TintOptions {
    let step = &config.step;
    TintOptions {
        float_dtype: dtype,
        gate_mode: config.gate_mode,
        gate_scale: config.gate_scale,
        execution: config.execution,
        derivative: match step.step.derivatives {
            DerivativeMode::FiniteDifference => Derivative::FiniteDifference {
                scale: step.step.scale_embeddings,
            },
            DerivativeMode::Exact => Derivative::Exact,
        },
        ln_epsilon: rms_eps,
        inner_lr: step.step.inner_lr,
        ..TintOptions::default()
    }
}

impl<B: Backend> LlamaSimulator<B> {
    /// Constructs the simulator of `model` (an [`AuxModel::Llama`]).
    ///
    /// # Errors
    /// As [`Self::from_params`], and [`SimError::UnsupportedModel`] for other architectures.
    pub fn new(model: &AuxModel<B>, config: LlamaSimulatorConfig) -> Result<Self, SimError> {
        Self::from_params(LlamaParams::from_aux(model)?, config)
    }

    /// Constructs the simulator on given weights (e.g. [`LlamaParams::cast`] to `DType::F64`):
    /// validates the sizes (docs/construction.md §1.2 and the attention variant), writes every layer's weights
    /// into prefix blocks and builds the modules.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] for step hyper-parameters out of range or RMSNorm gain updates
    /// (not constructed: see docs/tint-llama.md); [`SimError::Ops`] for TinT sizes that violate
    /// §1.2 or a KV head count that does not divide the query heads;
    /// [`SimError::UnsupportedModel`] when `n_heads · head_dim != d_model`.
    pub fn from_params(
        params: LlamaParams<B>,
        config: LlamaSimulatorConfig,
    ) -> Result<Self, SimError> {
        if config.step.updates.norm_gains {
            return Err(SimError::invalid_config(
                "updates.norm_gains",
                true,
                "is not simulated: RMSNorm gain updates are a functional-reference option only; the \
                 simulator freezes the gains (docs/tint-llama.md)",
            ));
        }
        if config.step.step.attention_backward == crate::AttentionBackwardMode::Exact {
            return Err(SimError::invalid_config(
                "step.attention_backward",
                "exact",
                "is not simulated: back-propagation through the attention scores is a functional-\
                 reference option only; TinT holds the attention probabilities constant \
                 (docs/construction.md §6.11)",
            ));
        }
        let d = params.d_model();
        if params.n_heads * params.head_dim != d {
            return Err(SimError::UnsupportedModel(format!(
                "n_heads · head_dim = {} · {} must equal d_model = {d}",
                params.n_heads, params.head_dim
            )));
        }
        let reference = LlamaReference::from_params(params, config.step.clone())?;
        let params = reference.params();
        let max_seq_length = config.max_seq_length.unwrap_or_else(|| {
            params
                .max_positions
                .min(MAX_POSITION_EMBEDDINGS.saturating_sub(config.num_prefixes))
        });
        let dims = TintDims::new(
            d,
            params.n_heads,
            config.hidden_size,
            config.num_prefixes,
            config.num_heads,
            max_seq_length,
            max_seq_length,
        )?;
        let variant = AttentionVariant {
            n_kv_heads: params.n_kv_heads,
            rope_theta: Some(params.rope_theta),
        };
        let dtype = params.dtype();
        let device = params.embedding.device();
        let options = tint_options(&config, params.rms_eps, dtype);
        let attention = SimulatedAttentionHalf::new(&dims, &variant, &options, &device)?;
        let mlp = SimulatedMlpHalf::new(&dims, &options, &device)?;
        let batched = |t: &Tensor<B, 2>| t.clone().unsqueeze_dim::<3>(0);
        let gain = |t: &Tensor<B, 1>| t.clone().unsqueeze_dim::<2>(0);
        let mut layers = Vec::with_capacity(params.layers.len());
        for layer in &params.layers {
            let weights = AttentionWeights {
                w_q: batched(&layer.w_q),
                w_k: batched(&layer.w_k),
                w_v: batched(&layer.w_v),
                w_o: batched(&layer.w_o),
            };
            layers.push(LayerPrefixes {
                attention: attention.write_prefixes(gain(&layer.attn_norm), &weights)?,
                mlp_norm: mlp.norm_prefix(gain(&layer.mlp_norm))?,
                mlp: mlp.mlp.write_prefixes(
                    batched(&layer.w_gate),
                    batched(&layer.w_up),
                    batched(&layer.w_down),
                )?,
            });
        }
        // The structured execution with exact gates runs the layers below the first simulated one
        // as plain blocks (`forward`): their weights, read out of their prefix blocks once here.
        let first = params.layers.len() - config.step.simulated_layers(params.layers.len());
        let top = layers.split_off(first);
        let lower = if first > 0
            && config.execution == Execution::Structured
            && config.gate_mode == GateMode::Exact
        {
            let d_ff = params.layers.first().map_or(0, |l| l.w_gate.dims()[1]);
            LowerLayers::Plain(
                layers
                    .iter()
                    .map(|blocks| read_layer(blocks, &attention, &mlp, &dims, d_ff))
                    .collect::<Result<Vec<_>, _>>()?,
            )
        } else {
            LowerLayers::Simulated(layers)
        };
        let final_norm_prefix = prefix::write_layer_norm(
            gain(&params.final_norm),
            gain(&params.final_norm).zeros_like(),
            &dims,
        )?;
        Ok(Self {
            head_rows: params.head_rows(),
            final_norm_forward: NormForward::new(NormKind::Rms, &dims, &options, &device)?,
            final_norm_backward: NormBackward::new(NormKind::Rms, &dims, &options, &device)?,
            config,
            dims,
            lower,
            top,
            final_norm_prefix,
            attention,
            mlp,
            reference,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LlamaSimulatorConfig {
        &self.config
    }

    /// The validated TinT sizes (with `T = Tmax`).
    pub fn dims(&self) -> &TintDims {
        &self.dims
    }

    /// The auxiliary weights the simulator was built from.
    pub fn params(&self) -> &LlamaParams<B> {
        self.reference.params()
    }

    /// Runs the simulator: forward pass over every layer, `n_forward_backward` simulated SGD steps on
    /// the top `n_simulation_layers` layers, final forward pass; each sequence gets its own update.
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] as [`LlamaReference::forward`], and sequences longer than `Tmax`.
    pub fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        self.reference.validate(input)?;
        let [_, seq_length] = input.dims();
        if seq_length > self.dims.max_seq_length() {
            return Err(SimError::InvalidInput(format!(
                "sequence length {seq_length} exceeds the simulator's Tmax = {}",
                self.dims.max_seq_length()
            )));
        }
        crate::sequences::forward_in_parallel(input, |input| simulate(self, input))
    }

    /// [`Self::forward`] with the training part of sequence `b` being its first `train_lengths[b]`
    /// tokens.
    ///
    /// # Shapes
    /// `input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// As [`Self::forward`], and a train length count different from the batch size or a train
    /// length above the sequence length.
    pub fn forward_with_train_lengths(
        &self,
        input_ids: Tensor<B, 2, burn::tensor::Int>,
        train_lengths: &[usize],
    ) -> Result<SimOutput<B>, SimError> {
        self.forward(&SimInput::with_train_lengths(input_ids, train_lengths)?)
    }

    /// Parameters of one copy of each constructed module kind: (forward modules of a layer,
    /// backward modules of a layer, final-norm gradient module). Modules shared by the SwiGLU
    /// chunks and by the gate/up projections count once (paper J.3 parameter sharing).
    pub fn module_params(&self) -> (usize, usize, usize) {
        let (attention_forward, attention_backward) = self.attention.num_module_params();
        let (mlp_forward, mlp_backward) = self.mlp.num_module_params();
        let gradient = self.final_norm_forward.num_params() + self.final_norm_backward.num_params();
        (
            attention_forward + mlp_forward,
            attention_backward + mlp_backward,
            gradient,
        )
    }

    /// Prefix blocks per layer: RMSNorm₁, `W_Q`, `W_K`, `W_V`, `W_O`, RMSNorm₂, and gate / up / down
    /// per `D`-wide SwiGLU chunk.
    pub fn blocks_per_layer(&self) -> usize {
        6 + 3 * self.top.first().map_or(0, |l| l.mlp.gate.len())
    }

    /// Number of parameters counted the way the GPT-2 simulator counts them (docs/construction.md §11): the
    /// token embedding (and an untied head), every prefix block, one copy of the forward modules
    /// per layer, one copy of the backward modules per simulated layer and step, the final-norm
    /// gradient module, the final-norm prefix block, and the final forward pass's module copies.
    pub fn num_params(&self) -> usize {
        let (p, ds) = (self.dims.n_prefixes(), self.dims.d_sim());
        let n_layers = self.params().layers.len();
        let step = &self.config.step;
        let n_sim = step.simulated_layers(n_layers);
        let n_fb = step.step.n_forward_backward;
        let (forward_modules, backward_modules, gradient) = self.module_params();
        let params = self.params();
        let embeddings = params.embedding.dims().iter().product::<usize>()
            + params
                .lm_head
                .as_ref()
                .map_or(0, |h| h.dims().iter().product::<usize>());
        embeddings
            + n_layers * (forward_modules + self.blocks_per_layer() * p * ds)
            + n_sim * n_fb * backward_modules
            + gradient
            + p * ds
            + n_sim * n_fb * forward_modules
    }

    /// Number of stored values the [`Execution::Constructed`] execution actually reads: the token
    /// embedding (and an untied head), every prefix block (the final norm's included) and ONE copy
    /// of each constructed module kind — a module's weights depend only on the TinT sizes and
    /// options, so one instance serves every layer and step (the official count of
    /// [`Self::num_params`] allocates a copy per layer and step).
    pub fn num_params_read(&self) -> usize {
        let (p, ds) = (self.dims.n_prefixes(), self.dims.d_sim());
        let (forward_modules, backward_modules, gradient) = self.module_params();
        let params = self.params();
        let embeddings = params.embedding.dims().iter().product::<usize>()
            + params
                .lm_head
                .as_ref()
                .map_or(0, |h| h.dims().iter().product::<usize>());
        embeddings
            + (self.params().layers.len() * self.blocks_per_layer() + 1) * p * ds
            + forward_modules
            + backward_modules
            + gradient
    }
}

/// The LLaMA family in the shared simulated step: the state is `[prefix rows, token rows]`
/// (`[batch_size, P + T, Ds]`), each layer an attention half and a SwiGLU half, both after an
/// RMSNorm; the final RMSNorm is not updated.
impl<B: Backend> StepFamily<B> for LlamaSimulator<B> {
    type Context = SimContext<B>;
    type State = Tensor<B, 3>;
    type LayerWeights = LayerPrefixes<B>;
    /// The final RMSNorm's prefix block.
    type FinalWeights = Tensor<B, 3>;
    type LayerActs = LayerActs<B>;
    type FinalState = FinalNormState<B>;

    fn head_matrix(&self) -> Tensor<B, 2> {
        self.head_rows.clone()
    }

    /// One simulated layer forward: attention half, then MLP half.
    fn forward_layer(
        &self,
        state: Tensor<B, 3>,
        prefixes: &LayerPrefixes<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, LayerActs<B>) {
        let (h_mid, attention) = self.attention.forward(state, &prefixes.attention, ctx);
        let (out, mlp) = self
            .mlp
            .forward(h_mid, &prefixes.mlp_norm, &prefixes.mlp, ctx);
        (out, LayerActs { attention, mlp })
    }

    fn final_norm(
        &self,
        state: Tensor<B, 3>,
        final_prefix: &Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> FinalPass<B, FinalNormState<B>> {
        let (p, d) = (self.dims.n_prefixes(), self.dims.d_model());
        let state = self
            .final_norm_forward
            .forward(layout::with_prefix_rows(state, final_prefix.clone()), ctx);
        let act = layout::token_memory(state.clone(), p, self.dims.ln_memory_index());
        let hf = layout::token_rows(state.clone(), p).narrow(2, 0, d);
        let logits = head_logits(hf.clone(), &self.head_rows);
        FinalPass {
            state: FinalNormState { state, act },
            hf,
            logits,
        }
    }

    /// The loss gradient written into the token rows' signal columns, the norm's memory into
    /// their memory, then the final RMSNorm's backward (its gain is not updated).
    fn final_backward(
        &self,
        grad: Tensor<B, 3>,
        final_state: &FinalNormState<B>,
        final_prefix: &mut Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let [batch_size, seq_length, d] = grad.dims();
        let p = self.dims.n_prefixes();
        let signal = final_state
            .state
            .clone()
            .slice_assign([0..batch_size, p..p + seq_length, 0..d], grad);
        let signal = layout::with_token_memory(
            signal,
            p,
            self.dims.ln_memory_index(),
            final_state.act.clone(),
        );
        self.final_norm_backward
            .forward(layout::with_prefix_rows(signal, final_prefix.clone()), ctx)
    }

    /// The MLP half's backward + descent, then the attention half's; the lowest simulated layer
    /// only descends its attention half (its RMSNorm backward and residual sum would be dead
    /// work).
    fn backward_layer(
        &self,
        delta: Tensor<B, 3>,
        prefixes: &mut LayerPrefixes<B>,
        acts: &LayerActs<B>,
        ctx: &SimContext<B>,
        index: usize,
    ) -> Tensor<B, 3> {
        let updates = &self.config.step.updates;
        let (st, new_mlp) =
            self.mlp
                .backward(delta, &prefixes.mlp_norm, &prefixes.mlp, &acts.mlp, ctx);
        let attention_step = if index == 0 {
            SimulatedAttentionHalf::descend
        } else {
            SimulatedAttentionHalf::backward
        };
        let (st, new_attention) = attention_step(
            &self.attention,
            st,
            &prefixes.attention,
            &acts.attention,
            ctx,
            updates.attn_output,
            updates.attn_value,
        );
        if updates.mlp {
            prefixes.mlp = new_mlp;
        }
        prefixes.attention = new_attention;
        st
    }
}

impl<B: Backend> SimulatedFamily<B> for LlamaSimulator<B> {
    fn dims(&self) -> &TintDims {
        &self.dims
    }

    fn step(&self) -> &StepConfig {
        &self.config.step.step
    }

    fn official_compat(&self) -> bool {
        false
    }

    /// The blocks below the first simulated layer: no step updates them and no later module reads
    /// their memories. The structured execution with exact gates runs them as plain blocks on the
    /// `D` token columns, with the weights read from their prefix rows at construction
    /// (docs/construction.md §15); otherwise each runs as its simulated layer.
    fn lower_state(
        &self,
        input: &SimInput<B>,
        dims: &TintDims,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let [batch_size, seq_length] = input.dims();
        let (dtype, device) = (self.head_rows.dtype(), self.head_rows.device());
        let (p, d, ds) = (dims.n_prefixes(), dims.d_model(), dims.d_sim());
        // A `[batch_size, T, D]` token signal as a state: prefix rows 0, token rows [x_t, 0, ...].
        let widen = |hidden: Tensor<B, 3>| {
            let tokens = layout::cat_columns(vec![(Some(hidden), d), (None, ds - d)]);
            layout::join_rows(Tensor::zeros([batch_size, p, ds], (&device, dtype)), tokens)
        };
        match &self.lower {
            LowerLayers::Plain(weights) => widen(self.reference.run_blocks(weights, input)),
            LowerLayers::Simulated(blocks) => {
                let ids = input.input_ids.clone().reshape([batch_size * seq_length]);
                let embeddings = self
                    .params()
                    .embedding
                    .clone()
                    .select(0, ids)
                    .reshape([batch_size, seq_length, d]);
                let expand = |t: &Tensor<B, 3>| t.clone().expand([batch_size, p, ds]);
                blocks.iter().fold(widen(embeddings), |state, layer| {
                    self.forward_layer(state, &layer.map(expand), ctx).0
                })
            }
        }
    }

    fn top_prefixes(&self, batch_size: usize) -> (Vec<LayerPrefixes<B>>, Tensor<B, 3>) {
        let (p, ds) = (self.dims.n_prefixes(), self.dims.d_sim());
        let expand = |t: &Tensor<B, 3>| t.clone().expand([batch_size, p, ds]);
        let prefixes = self.top.iter().map(|l| l.map(expand)).collect();
        (prefixes, expand(&self.final_norm_prefix))
    }
}
