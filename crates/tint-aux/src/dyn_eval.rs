//! Dynamic evaluation (docs/construction.md §10): explicit SGD steps on the training part of a sequence with
//! burn autodiff, then evaluation of the rest with the updated model.
//!
//! The input model is never changed: burn tensors are immutable, and every step builds a new
//! [`AuxModel`] whose selected parameters are `theta - lr * grad`.

use burn::module::{AutodiffModule, Param};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};

use crate::loss::{continuation_nll, lm_loss, LossMask, LossReduction};
use crate::model::AuxModel;
use crate::params::{ParamGroup, ParamInfo, ParamMapper};
use crate::AuxError;

/// Which parameters train.
///
/// A parameter trains when both criteria hold:
/// - layers: with `top_layers = Some(k)`, parameters of blocks `n_layers - k..n_layers` and the final
///   LayerNorm (it sits above every block); embeddings (and OPT projections) never. `None`: everything.
/// - groups: with `groups = Some(g)`, parameters whose [`ParamGroup`] is in `g`. `None`: every group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParamSelection {
    /// Train only the top `k` blocks (and the final LayerNorm).
    pub top_layers: Option<usize>,
    /// Train only these groups.
    pub groups: Option<Vec<ParamGroup>>,
}

impl ParamSelection {
    /// Every parameter (the official dynamic-evaluation baseline).
    pub fn all() -> Self {
        Self::default()
    }

    /// The top `k` blocks and the final LayerNorm.
    pub fn top_layers(k: usize) -> Self {
        Self {
            top_layers: Some(k),
            groups: None,
        }
    }

    /// Only the named groups, e.g. `["ln", "attn_v", "mlp"]` (`attn` = the four attention groups).
    pub fn groups<S: AsRef<str>>(names: &[S]) -> Result<Self, AuxError> {
        let mut groups = Vec::new();
        for name in names {
            groups.extend(ParamGroup::parse_many(name.as_ref())?);
        }
        Ok(Self {
            top_layers: None,
            groups: Some(groups),
        })
    }

    /// Whether the parameter `info` trains in a model with `n_layers` blocks.
    pub fn selects(&self, info: &ParamInfo, n_layers: usize) -> bool {
        let layer_ok = match (self.top_layers, info.layer) {
            (None, _) => true,
            (Some(k), Some(layer)) => layer + k >= n_layers,
            (Some(_), None) => info.group == ParamGroup::LayerNorm,
        };
        let group_ok = self
            .groups
            .as_ref()
            .is_none_or(|groups| groups.contains(&info.group));
        layer_ok && group_ok
    }

    fn validate(&self, n_layers: usize) -> Result<(), AuxError> {
        if let Some(k) = self.top_layers {
            if k == 0 || k > n_layers {
                return Err(AuxError::InvalidOption {
                    reason: format!("top_layers must be in 1..={n_layers}, got {k}"),
                });
            }
        }
        if self.groups.as_ref().is_some_and(Vec::is_empty) {
            return Err(AuxError::InvalidOption {
                reason: "the parameter group list is empty".to_string(),
            });
        }
        Ok(())
    }
}

/// Options of dynamic evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct DynEvalConfig {
    /// SGD learning rate. Default: 1e-3.
    pub lr: f64,
    /// Number of SGD steps on the same training part. Default: 1.
    pub steps: usize,
    /// Mean (HF, the official baseline) or sum over the counted targets. Default: mean.
    pub reduction: LossReduction,
    /// Which parameters train. Default: all.
    pub params: ParamSelection,
    /// Which targets of the training part count. Default: all.
    pub loss_mask: LossMask,
    /// How the backward pass keeps its intermediates. Default: [`GradientMemory::Least`].
    pub memory: GradientMemory,
}

/// How the backward pass of a step keeps the forward pass's intermediates. Both give the same
/// gradients (the same operations; tested to the bit on a tied tiny LLaMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GradientMemory {
    /// The least the architecture offers: on LLaMA models one block's intermediates at a time
    /// (recomputed from each block's stored input, a second forward pass; see
    /// `crate::llama::blockwise_backward`); GPT-2 and OPT keep the whole graph.
    #[default]
    Least,
    /// The whole autodiff graph of the forward pass (every block's intermediates at once).
    WholeGraph,
}

impl Default for DynEvalConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            steps: 1,
            reduction: LossReduction::Mean,
            params: ParamSelection::all(),
            loss_mask: LossMask::AllTokens,
            memory: GradientMemory::Least,
        }
    }
}

impl DynEvalConfig {
    fn validate(&self, n_layers: usize) -> Result<(), AuxError> {
        check_lr(self.lr)?;
        self.params.validate(n_layers)
    }
}

/// A learning rate must be finite and non-negative.
fn check_lr(lr: f64) -> Result<(), AuxError> {
    if !lr.is_finite() || lr < 0.0 {
        return Err(AuxError::InvalidOption {
            reason: format!("lr must be finite and >= 0, got {lr}"),
        });
    }
    Ok(())
}

/// The model after the SGD steps, and the training loss before each step.
#[derive(Debug)]
pub struct DynEvalUpdate<B: AutodiffBackend> {
    /// The updated copy of the model.
    pub model: AuxModel<B>,
    /// Training loss before step `i`, for `i in 0..steps`.
    pub losses: Vec<f64>,
}

/// Marks the selected parameters as trainable leaves and detaches the others.
struct MarkTrainable<'a> {
    selection: &'a ParamSelection,
    n_layers: usize,
}

impl<B: AutodiffBackend> ParamMapper<B> for MarkTrainable<'_> {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        let train = self.selection.selects(info, self.n_layers);
        param.map(|t| t.detach().set_require_grad(train))
    }
}

/// The gradients of one backward pass, keyed by the marked parameters: one container for the
/// whole graph, or one per pass of the block-by-block backward, where a parameter's gradient is
/// the sum over the containers that hold it (a tied embedding is read by the LM head and the
/// embedding: two; every other parameter: one).
struct StepGradients<B: AutodiffBackend> {
    parts: Vec<B::Gradients>,
}

impl<B: AutodiffBackend> StepGradients<B> {
    /// The gradient of `param`, if it has one.
    fn of<const D: usize>(&self, param: &Tensor<B, D>) -> Option<Tensor<B::InnerBackend, D>> {
        self.parts
            .iter()
            .filter_map(|grads| param.grad(grads))
            .reduce(|sum, part| sum + part)
    }
}

/// One SGD step `theta <- theta - lr * grad` on the selected parameters.
struct SgdStep<'a, B: AutodiffBackend> {
    grads: &'a StepGradients<B>,
    lr: f64,
    selection: &'a ParamSelection,
    n_layers: usize,
}

impl<B: AutodiffBackend> ParamMapper<B> for SgdStep<'_, B> {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        if !self.selection.selects(info, self.n_layers) {
            return param;
        }
        let (grads, lr) = (self.grads, self.lr);
        param.map(|t| match grads.of(&t) {
            Some(grad) => Tensor::from_inner(t.inner() - grad * lr).require_grad(),
            None => t,
        })
    }
}

/// Runs `config.steps` SGD steps on `input_ids` (all of it is the training part) and returns the
/// updated copy of `model`.
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`
///
/// # Errors
///
/// Invalid options (negative or non-finite lr, bad layer count, empty group list, bad loss mask) and
/// invalid input ids.
pub fn sgd_update<B: AutodiffBackend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    config: &DynEvalConfig,
) -> Result<DynEvalUpdate<B>, AuxError> {
    let n_layers = model.n_layers();
    config.validate(n_layers)?;
    let mut current = mark_trainable(model, &config.params);
    let mut losses = Vec::with_capacity(config.steps);
    for _ in 0..config.steps {
        let (loss, grads) = loss_and_gradients(&current, input_ids.clone(), config)?;
        losses.push(loss);
        current = current.map_named_params(&mut SgdStep {
            grads: &grads,
            lr: config.lr,
            selection: &config.params,
            n_layers,
        });
    }
    Ok(DynEvalUpdate {
        model: current,
        losses,
    })
}

/// `model` with the selected parameters marked as trainable leaves and the others detached.
fn mark_trainable<B: AutodiffBackend>(
    model: &AuxModel<B>,
    selection: &ParamSelection,
) -> AuxModel<B> {
    let n_layers = model.n_layers();
    model.clone().map_named_params(&mut MarkTrainable {
        selection,
        n_layers,
    })
}

/// Bytes of the parameters of `model` that `selection` trains: the memory of one step's
/// gradient, or of one kept update (every parameter of SmolLM2-135M in float32: 0.54 GB).
pub fn selected_param_bytes<B: Backend>(model: &AuxModel<B>, selection: &ParamSelection) -> u64 {
    struct Count<'a> {
        selection: &'a ParamSelection,
        n_layers: usize,
        bytes: u64,
    }
    impl<B: Backend> ParamMapper<B> for Count<'_> {
        fn map<const D: usize>(
            &mut self,
            info: &ParamInfo,
            param: Param<Tensor<B, D>>,
        ) -> Param<Tensor<B, D>> {
            if self.selection.selects(info, self.n_layers) {
                let value = param.val();
                let bytes = (value.shape().num_elements() * value.dtype().size()) as u64;
                self.bytes = self.bytes.saturating_add(bytes);
            }
            param
        }
    }
    let mut count = Count {
        selection,
        n_layers: model.n_layers(),
        bytes: 0,
    };
    let _ = model.clone().map_named_params(&mut count);
    count.bytes
}

/// The training loss of `model` on `input_ids` and its gradients.
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`
fn loss_and_gradients<B: AutodiffBackend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    config: &DynEvalConfig,
) -> Result<(f64, StepGradients<B>), AuxError> {
    let (mask, reduction) = (&config.loss_mask, config.reduction);
    let (loss, parts) = match (model, config.memory) {
        (AuxModel::Llama(llama), GradientMemory::Least) => {
            crate::llama::blockwise_loss_and_gradients(llama, input_ids, mask, reduction)?
        }
        _ => {
            let loss = lm_loss(model, input_ids, mask, reduction)?;
            let grads = loss.clone().backward();
            (loss, vec![grads])
        }
    };
    Ok((scalar_f64(loss), StepGradients { parts }))
}

/// The gradient of one SGD step of dynamic evaluation on one training batch, before it is scaled
/// by the learning rate ([`sgd_gradient`]): [`SgdGradient::step`] gives what [`sgd_update`] with
/// one step gives at any learning rate, with the same operations, from one backward pass — what
/// tuning the learning rate on a grid needs.
pub struct SgdGradient<B: AutodiffBackend> {
    /// The model with the trained parameters marked (the gradients are keyed by them).
    model: AuxModel<B>,
    grads: StepGradients<B>,
    /// The training loss before the step.
    loss: f64,
    selection: ParamSelection,
}

impl<B: AutodiffBackend> std::fmt::Debug for SgdGradient<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SgdGradient")
            .field("loss", &self.loss)
            .field("selection", &self.selection)
            .finish_non_exhaustive()
    }
}

/// The gradient of the training loss of `model` on `input_ids` with `config`'s loss mask,
/// reduction and parameter selection (`config.lr` and `config.steps` are not used).
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`
///
/// # Errors
///
/// As [`sgd_update`].
pub fn sgd_gradient<B: AutodiffBackend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    config: &DynEvalConfig,
) -> Result<SgdGradient<B>, AuxError> {
    config.params.validate(model.n_layers())?;
    let marked = mark_trainable(model, &config.params);
    let (loss, grads) = loss_and_gradients(&marked, input_ids, config)?;
    Ok(SgdGradient {
        model: marked,
        grads,
        loss,
        selection: config.params.clone(),
    })
}

impl<B: AutodiffBackend> SgdGradient<B> {
    /// The model after one SGD step with learning rate `lr`: equal (to the bit) to
    /// [`sgd_update`] with one step at `lr` on the same batch.
    ///
    /// # Errors
    ///
    /// [`AuxError::InvalidOption`] for a negative or non-finite `lr`.
    pub fn step(&self, lr: f64) -> Result<DynEvalUpdate<B>, AuxError> {
        check_lr(lr)?;
        let n_layers = self.model.n_layers();
        let model = self.model.clone().map_named_params(&mut SgdStep {
            grads: &self.grads,
            lr,
            selection: &self.selection,
            n_layers,
        });
        Ok(DynEvalUpdate {
            model,
            losses: vec![self.loss],
        })
    }
}

/// Result of dynamic evaluation of one batch of sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct DynEvalOutcome {
    /// Training loss before each SGD step.
    pub train_losses: Vec<f64>,
    /// NLL of the evaluation tokens `train_length..seq_length` under the updated model, per sequence.
    pub eval_nll: Vec<Vec<f64>>,
}

/// Dynamic evaluation of `input_ids` (docs/construction.md §10): SGD on tokens `0..train_length` (targets
/// `1..train_length`, or those of `config.loss_mask`, which then has shape
/// `[batch_size][train_length]`), then the NLL of tokens `train_length..seq_length` given the whole
/// prefix, with the updated model.
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`
///
/// # Errors
///
/// As [`sgd_update`], and `train_length` outside `2..seq_length`.
pub fn dynamic_eval<B: AutodiffBackend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    train_length: usize,
    config: &DynEvalConfig,
) -> Result<DynEvalOutcome, AuxError> {
    dynamic_eval_with(model, input_ids, train_length, |train_ids| {
        sgd_update(model, train_ids, config)
    })
}

/// [`dynamic_eval`] with the update made by `update` from the training part's ids (e.g. one step
/// of an [`SgdGradient`] kept across learning rates): the same checks, the same scoring.
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`; `update` is given `[batch_size, train_length]`
///
/// # Errors
///
/// `train_length` outside `2..seq_length`, invalid input ids, and the errors of `update`.
pub fn dynamic_eval_with<B: AutodiffBackend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    train_length: usize,
    update: impl FnOnce(Tensor<B, 2, Int>) -> Result<DynEvalUpdate<B>, AuxError>,
) -> Result<DynEvalOutcome, AuxError> {
    let [batch_size, seq_length] = input_ids.dims();
    if train_length < 2 || train_length >= seq_length {
        return Err(AuxError::InvalidOption {
            reason: format!("train_length must be in 2..{seq_length}, got {train_length}"),
        });
    }
    model.validate_input_ids(&input_ids)?;
    let train_ids = input_ids.clone().slice([0..batch_size, 0..train_length]);
    let update = update(train_ids)?;
    let eval_model = update.model.valid();
    let eval_nll = continuation_nll(&eval_model, input_ids.inner(), train_length)?;
    Ok(DynEvalOutcome {
        train_losses: update.losses,
        eval_nll,
    })
}

/// The value of a one-element tensor as `f64`, whatever its float dtype.
pub(crate) fn scalar_f64<B: burn::tensor::backend::Backend>(tensor: Tensor<B, 1>) -> f64 {
    tensor
        .into_data()
        .convert::<f64>()
        .as_slice::<f64>()
        .map(|values| values[0])
        .unwrap_or(f64::NAN)
}
