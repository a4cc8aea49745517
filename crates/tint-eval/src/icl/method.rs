//! The methods compared in in-context classification: plain in-context learning, dynamic evaluation
//! (explicit SGD on the demonstrations, then classification), and any other method — TinT's
//! simulator — through the [`IclMethod`] trait.

use burn::module::{AutodiffModule, Module};
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use std::rc::Rc;
use tint_aux::loss::next_token_nll;
use tint_aux::{
    selected_param_bytes, sgd_gradient, sgd_update, AuxModel, BackwardMemory, DynEvalConfig,
    LossMask, PrefixCache, SgdGradient,
};

use super::prompt::{DemoFormat, TrainingSequences};
use crate::non_finite::{adapted_origin, weights_origin, NonFiniteOrigin};
use crate::step_reuse::{HeldBytes, StepKey, StepReuse};
use crate::EvalError;

/// What a method scores: candidate continuations of a context, and which part of the context is
/// demonstrations (for methods that train inside the forward pass, like TinT).
#[derive(Debug, Clone, Copy)]
pub struct ScoreRequest<'a> {
    /// The classification context (demonstrations, if any, then the query or calibration prompt).
    pub context: &'a [u32],
    /// `context[..demo_len]` are demonstrations; 0 when there are none in the context.
    pub demo_len: usize,
    /// Training targets over `context[..demo_len]` (label-only or full-context loss).
    pub demo_targets: &'a [bool],
    /// Candidate continuations (the label words' token ids).
    pub candidates: &'a [Vec<u32>],
}

impl<'a> ScoreRequest<'a> {
    /// A request without demonstrations in the context.
    pub fn plain(context: &'a [u32], candidates: &'a [Vec<u32>]) -> Self {
        Self {
            context,
            demo_len: 0,
            demo_targets: &[],
            candidates,
        }
    }
}

/// A way to classify with label-word log-probabilities, possibly after internal training.
///
/// The runner calls [`IclMethod::adapt`] with the training sequences (the k demonstrations in the
/// Single or Multi format, or, zero-shot, the query's own context) and then [`IclMethod::score`] for
/// every context that uses that adaptation. A method that trains and evaluates in one forward pass
/// (TinT) keeps the sequences in `adapt` and uses them in `score`.
pub trait IclMethod {
    /// Name in reports.
    fn name(&self) -> String;

    /// Whether the method trains on the demonstrations (false: they only go in the context).
    fn trains(&self) -> bool;

    /// Adapts to `train` (replacing any earlier adaptation); an empty set restores the base model.
    ///
    /// # Errors
    ///
    /// Model errors, invalid training settings.
    fn adapt(&mut self, train: &TrainingSequences) -> Result<(), EvalError>;

    /// `log P(candidate_c | context)` for every candidate continuation (summed over its tokens).
    ///
    /// # Errors
    ///
    /// Model errors (e.g. a context longer than the model's positions).
    fn score(&mut self, request: &ScoreRequest<'_>) -> Result<Vec<f64>, EvalError>;

    /// Called by the runner before each seed's adaptation: a method whose step size was tuned per
    /// seed ([`super::PerSeedStep`]) switches to that seed's. The default ignores it.
    fn begin_seed(&mut self, seed: u64) {
        let _ = seed;
    }

    /// Whether the method can train on demonstrations in `format` (default: both formats).
    fn supports(&self, format: DemoFormat) -> bool {
        let _ = format;
        true
    }

    /// Training loss before each step of the last adaptation (empty if none or not reported).
    fn train_losses(&self) -> Vec<f64> {
        Vec::new()
    }

    /// Where a non-finite score of `request` (or, with `None`, a non-finite training loss of the
    /// last adaptation) came from; asked only after one, so it may recompute. The default does
    /// not know.
    fn non_finite_origin(&mut self, request: Option<&ScoreRequest<'_>>) -> NonFiniteOrigin {
        let _ = request;
        NonFiniteOrigin::Unknown
    }
}

/// Right-pads `rows` with `pad` to a `[rows, max_len]` id tensor.
///
/// # Shapes
///
/// - output: `[rows.len(), max_len]`
pub fn padded_ids<B: Backend>(
    rows: &[Vec<u32>],
    pad: u32,
    device: &B::Device,
) -> Tensor<B, 2, Int> {
    let max_len = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut flat = Vec::with_capacity(rows.len() * max_len);
    for row in rows {
        flat.extend(row.iter().map(|&t| t as i64));
        flat.extend(std::iter::repeat_n(pad as i64, max_len - row.len()));
    }
    Tensor::from_data(TensorData::new(flat, [rows.len(), max_len]), device)
}

/// `log P(candidate_c | context)` for each candidate under `model`, in one batched forward pass of
/// the sequences `context ++ candidate_c` (right-padded; causal attention keeps padding invisible).
///
/// # Errors
///
/// An empty context or candidate list, an empty candidate, and model errors.
pub fn candidate_log_probs<B: Backend>(
    model: &AuxModel<B>,
    context: &[u32],
    candidates: &[Vec<u32>],
) -> Result<Vec<f64>, EvalError> {
    score_candidates(model, context, candidates, None)
}

/// [`candidate_log_probs`]; with a `cache`, single-token label words are scored reusing the
/// keys and values of the prefix `context` shares with the last context the cache saw
/// ([`AuxModel::last_position_logits_reusing`]: the demonstrations before every query of a cell).
pub(crate) fn score_candidates<B: Backend>(
    model: &AuxModel<B>,
    context: &[u32],
    candidates: &[Vec<u32>],
    cache: Option<&mut PrefixCache<B>>,
) -> Result<Vec<f64>, EvalError> {
    if context.is_empty() || candidates.is_empty() || candidates.iter().any(Vec::is_empty) {
        return Err(EvalError::InvalidSetting {
            name: "context/candidates",
            value: format!(
                "{} context tokens, {} candidates",
                context.len(),
                candidates.len()
            ),
            rule: "scoring needs a non-empty context and non-empty candidates".into(),
        });
    }
    let device = model.devices()[0].clone();
    // Single-token label words (the usual case): one sequence, the next-token distribution after
    // the context, instead of one padded sequence per candidate (causal attention: same logits);
    // the LM head runs on the last position only.
    if candidates.iter().all(|c| c.len() == 1) {
        let logits = match cache {
            Some(cache) => model.last_position_logits_reusing(context, cache)?,
            None => {
                let ids = padded_ids::<B>(&[context.to_vec()], context[0], &device);
                model.last_position_logits(ids)?
            }
        };
        return next_token_log_probs(logits, 1, candidates);
    }
    let ids = candidate_batch::<B>(context, candidates, &device);
    let logits = model.forward(ids.clone())?;
    sum_candidate_log_probs(logits, ids, context.len(), candidates)
}

/// `log P(c | context)` for single-token candidates, from the logits after the last context token.
///
/// # Shapes
///
/// - logits: `[1, context_len, vocab_size]`
pub(crate) fn next_token_log_probs<B: Backend>(
    logits: Tensor<B, 3>,
    context_len: usize,
    candidates: &[Vec<u32>],
) -> Result<Vec<f64>, EvalError> {
    let [_, _, vocab_size] = logits.dims();
    let last = logits.slice([0..1, context_len - 1..context_len, 0..vocab_size]);
    let log_probs = logits_to_f64(log_softmax(last, 2))?;
    candidates
        .iter()
        .map(|c| {
            let token = c[0] as usize;
            log_probs
                .get(token)
                .copied()
                .ok_or_else(|| EvalError::InvalidSetting {
                    name: "candidate token",
                    value: token.to_string(),
                    rule: format!("must be below the vocabulary size {vocab_size}").into(),
                })
        })
        .collect()
}

/// The `[n_candidates, context + longest candidate]` batch of `context ++ candidate_c`, right-padded
/// with `context[0]`.
///
/// # Shapes
///
/// - output: `[candidates.len(), context.len() + max candidate length]`
pub fn candidate_batch<B: Backend>(
    context: &[u32],
    candidates: &[Vec<u32>],
    device: &B::Device,
) -> Tensor<B, 2, Int> {
    let rows: Vec<Vec<u32>> = candidates
        .iter()
        .map(|c| context.iter().chain(c).copied().collect())
        .collect();
    padded_ids::<B>(&rows, context[0], device)
}

/// Reads a tensor computed from logits as `f64` values (row-major).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] when the values cannot be read as `f64`.
pub(crate) fn logits_to_f64<B: Backend, const D: usize>(
    values: Tensor<B, D>,
) -> Result<Vec<f64>, EvalError> {
    values
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map_err(|e| EvalError::InvalidSetting {
            name: "logits",
            value: format!("{e:?}"),
            rule: "must be readable as f64".into(),
        })
}

/// Sums `log P(token | prefix)` over each candidate's tokens, from the logits of a
/// [`candidate_batch`].
///
/// # Shapes
///
/// - logits: `[n_candidates, seq_length, vocab_size]`
/// - ids: `[n_candidates, seq_length]`
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] when the logits cannot be read as `f64`.
pub fn sum_candidate_log_probs<B: Backend>(
    logits: Tensor<B, 3>,
    ids: Tensor<B, 2, Int>,
    context_len: usize,
    candidates: &[Vec<u32>],
) -> Result<Vec<f64>, EvalError> {
    let [_, seq_length] = ids.dims();
    // [n_candidates, seq_length - 1]: entry (b, t) is -log P(token t + 1 | tokens ..= t).
    let nll = logits_to_f64(next_token_nll(logits, ids))?;
    let width = seq_length - 1;
    Ok(candidates
        .iter()
        .enumerate()
        .map(|(b, cand)| {
            (0..cand.len())
                .map(|j| -nll[b * width + context_len + j - 1])
                .sum()
        })
        .collect())
}

/// Plain (in-context) classification with the unchanged model: demonstrations, if any, are part of
/// the context.
pub struct PlainIcl<'a, B: Backend> {
    /// The auxiliary model.
    pub model: &'a AuxModel<B>,
    /// Keys and values of the last scored context (its demonstrations are the next one's).
    cache: PrefixCache<B>,
}

impl<'a, B: Backend> PlainIcl<'a, B> {
    /// Plain classification with `model`.
    pub fn new(model: &'a AuxModel<B>) -> Self {
        Self {
            model,
            cache: PrefixCache::default(),
        }
    }
}

impl<B: Backend> IclMethod for PlainIcl<'_, B> {
    fn name(&self) -> String {
        "icl".into()
    }

    fn trains(&self) -> bool {
        false
    }

    fn adapt(&mut self, _train: &TrainingSequences) -> Result<(), EvalError> {
        Ok(())
    }

    fn score(&mut self, request: &ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
        score_candidates(
            self.model,
            request.context,
            request.candidates,
            Some(&mut self.cache),
        )
    }

    fn non_finite_origin(&mut self, _request: Option<&ScoreRequest<'_>>) -> NonFiniteOrigin {
        weights_origin(self.model).unwrap_or(NonFiniteOrigin::Forward)
    }
}

/// Dynamic evaluation: `config.steps` SGD steps on the training sequences (loss on their target
/// tokens, `config.loss_mask` is replaced by them), then classification with the updated model.
pub struct DynEvalIcl<'a, B: AutodiffBackend> {
    /// The auxiliary model (never modified).
    pub model: &'a AuxModel<B>,
    /// Learning rate, steps, reduction and trained parameters.
    pub config: DynEvalConfig,
    /// The model without autodiff, used before any adaptation.
    base: AuxModel<B::InnerBackend>,
    /// The adapted model, `None` until [`IclMethod::adapt`] is called with training data.
    adapted: Option<AuxModel<B::InnerBackend>>,
    /// Training loss before each step of the last adaptation.
    pub last_losses: Vec<f64>,
    /// Keys and values of the last context scored by the current (base or adapted) model.
    cache: PrefixCache<B::InnerBackend>,
    /// The gradient shared with the methods of the other learning rates of a grid.
    reuse: Option<StepReuse<SgdGradient<B>>>,
    /// The method's name before its settings: `dyn-eval`, or `dyn-eval-matched` for the step on
    /// exactly TinT's parameters.
    family: &'static str,
    /// Bytes a step may need by its estimate ([`BackwardMemory`]); `None`: no limit.
    memory_limit: Option<u64>,
    /// What another method keeps at the same time, counted beside each step
    /// ([`Self::with_kept_beside`]).
    kept_beside: Option<HeldBytes>,
    /// Bytes of the parameters the step trains: one kept gradient
    /// ([`selected_param_bytes`], read once: the model and the selection do not change).
    gradient_bytes: u64,
}

impl<'a, B: AutodiffBackend> DynEvalIcl<'a, B> {
    /// This method taking its one-step gradient from `reuse` when another learning rate computed
    /// it on the same training set ([`crate::step_reuse`]; steps > 1 compute afresh).
    pub fn with_step_reuse(mut self, reuse: StepReuse<SgdGradient<B>>) -> Self {
        self.reuse = Some(reuse);
        self
    }

    /// This method named `family` before its settings (`dyn-eval-matched` when `config` trains
    /// exactly TinT's parameters), so its rows and cells are told apart from dynamic evaluation
    /// on every parameter.
    pub fn named(mut self, family: &'static str) -> Self {
        self.family = family;
        self
    }

    /// This method refusing a step whose estimated memory ([`BackwardMemory`]) is over `limit`
    /// bytes, before it allocates (an error naming the batch, the estimate and
    /// `--max-memory-gib`).
    pub fn with_memory_limit(mut self, limit: u64) -> Self {
        self.memory_limit = Some(limit);
        self
    }

    /// This method's step admission counting what another method's reuse holds at the time
    /// (`eval icl`: TinT's kept descent directions, resident while dynamic evaluation steps).
    pub fn with_kept_beside(mut self, held: HeldBytes) -> Self {
        self.kept_beside = Some(held);
        self
    }

    /// Dynamic evaluation of `model` with `config`, named `dyn-eval`.
    pub fn new(model: &'a AuxModel<B>, config: DynEvalConfig) -> Self {
        let gradient_bytes = selected_param_bytes(model, &config.params);
        Self {
            model,
            config,
            base: model.valid(),
            adapted: None,
            last_losses: Vec::new(),
            cache: PrefixCache::default(),
            reuse: None,
            family: "dyn-eval",
            memory_limit: None,
            kept_beside: None,
            gradient_bytes,
        }
    }
}

impl<B: AutodiffBackend> IclMethod for DynEvalIcl<'_, B> {
    fn name(&self) -> String {
        format!(
            "{}(lr={:e},steps={})",
            self.family, self.config.lr, self.config.steps
        )
    }

    fn trains(&self) -> bool {
        true
    }

    fn adapt(&mut self, train: &TrainingSequences) -> Result<(), EvalError> {
        self.last_losses.clear();
        // The scoring model changes: stored keys and values are the old model's.
        self.cache.clear();
        if train.is_empty() || train.n_targets() == 0 {
            self.adapted = None;
            return Ok(());
        }
        let device = self.model.devices()[0].clone();
        let ids = padded_ids::<B>(&train.ids, train.ids[0][0], &device);
        let [batch, max_len] = ids.dims();
        if let Some(limit) = self.memory_limit {
            // The gradients kept for the grid's other step sizes and the seed's cell sit beside
            // the step (the one this step makes among them).
            let kept = self.reuse.as_ref().map_or(0, StepReuse::capacity);
            BackwardMemory::of_model(self.model, batch, max_len, self.config.memory)
                .with_kept_gradients(kept, self.gradient_bytes)
                .with_kept_beside(self.kept_beside.as_ref().map_or(0, HeldBytes::get))
                .admit(
                    &format!(
                        "{}'s step on {batch} training sequence(s) of up to {max_len} positions",
                        self.family
                    ),
                    limit,
                    "--max-memory-gib",
                )?;
        }
        let targets = train
            .targets
            .iter()
            .map(|row| {
                let mut padded = row.clone();
                padded.resize(max_len, false);
                padded
            })
            .collect();
        let config = DynEvalConfig {
            loss_mask: LossMask::Targets(targets),
            ..self.config.clone()
        };
        // Non-finite losses are checked by the runner (which may be told to record them).
        let update = match &self.reuse {
            Some(reuse) if config.steps == 1 => {
                let key = StepKey {
                    settings: format!("dyn-eval {:?} {:?}", config.params, config.reduction),
                    ids: train.ids.clone(),
                    targets: train.targets.clone(),
                };
                let (model, batch) = (self.model, ids.clone());
                reuse
                    .get_or_compute_sized(key, self.gradient_bytes, || {
                        sgd_gradient(model, batch, &config).map(Rc::new)
                    })?
                    .step(config.lr)?
            }
            _ => sgd_update(self.model, ids, &config)?,
        };
        self.last_losses = update.losses;
        self.adapted = Some(update.model.valid());
        Ok(())
    }

    fn score(&mut self, request: &ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
        let model = self.adapted.as_ref().unwrap_or(&self.base);
        score_candidates(
            model,
            request.context,
            request.candidates,
            Some(&mut self.cache),
        )
    }

    fn train_losses(&self) -> Vec<f64> {
        self.last_losses.clone()
    }

    /// The weights; else the unadapted model: its loss before the first step, or its scores of
    /// `request`, already non-finite means the forward pass overflowed; otherwise the SGD update.
    fn non_finite_origin(&mut self, request: Option<&ScoreRequest<'_>>) -> NonFiniteOrigin {
        let mut unadapted_finite =
            self.adapted.is_some() && self.last_losses.first().is_none_or(|l| l.is_finite());
        if let (true, Some(request)) = (unadapted_finite, request) {
            unadapted_finite = candidate_log_probs(&self.base, request.context, request.candidates)
                .is_ok_and(|scores| scores.iter().all(|s| s.is_finite()));
        }
        adapted_origin(&self.base, unadapted_finite, || {
            format!(
                "dynamic evaluation: lr {:e}, {} step(s)",
                self.config.lr, self.config.steps
            )
        })
    }
}
