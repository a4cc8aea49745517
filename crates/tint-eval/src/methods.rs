//! The adaptation methods compared in the language-modelling evaluation.

use burn::module::{AutodiffModule, Module};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use tint_aux::loss::next_token_nll;

use tint_aux::{
    continuation_nll, continuation_nll_of_logits, dynamic_eval_with, sgd_gradient, sgd_update,
    AuxModel, DynEvalConfig, SgdGradient,
};
use tint_sim::{
    Engine, Execution, SimInput, SimOutput, StepDirection, TintConfig, TintStep, UpdatedModel,
};

use crate::lm::LmMethod;
use crate::non_finite::{adapted_origin, all_finite, weights_origin, NonFiniteOrigin};
use crate::perplexity::BlockNll;
use crate::step_reuse::{StepKey, StepReuse};
use crate::EvalError;

/// A block as a `[1, T]` id tensor.
pub use tint_aux::model::sequence_ids as block_ids;

/// Summed NLL of targets `train_len..T` from `[1, T, V]` logits of the block.
pub fn eval_part_nll<B: Backend>(
    logits: Tensor<B, 3>,
    ids: Tensor<B, 2, Int>,
    train_len: usize,
) -> Result<BlockNll, EvalError> {
    let [_, seq_length, _] = logits.dims();
    // [1, T-1]: position t predicts token t+1; targets train_len..T come from positions train_len-1..T-1.
    let nll = next_token_nll(logits, ids).slice([0..1, train_len - 1..seq_length - 1]);
    let sum_nll = nll.sum().into_scalar_f64();
    Ok(BlockNll {
        sum_nll,
        count: seq_length - train_len,
    })
}

/// Small extension to read a scalar as f64 on any backend.
trait IntoScalarF64 {
    fn into_scalar_f64(self) -> f64;
}

impl<B: Backend> IntoScalarF64 for Tensor<B, 1> {
    fn into_scalar_f64(self) -> f64 {
        self.into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .expect("converted to f64")[0]
    }
}

/// Per-target NLLs of the unadapted model by block (`nll[k]` is the NLL of token `k + 1` given
/// tokens `0..=k`), shared by the forks of a [`Vanilla`] and, when it reads them from a TinT
/// engine's first pass ([`Tint::recording_first_pass`]), filled by that engine.
pub type UnadaptedNlls = Arc<Mutex<HashMap<Vec<u32>, Vec<f64>>>>;

/// The unadapted model, with the training part as plain context.
///
/// The model does not change between train fractions, so the per-target NLL of each block is computed
/// once and reused for every fraction. Clones share the cache.
#[derive(Clone)]
pub struct Vanilla<'a, B: Backend> {
    model: &'a AuxModel<B>,
    cache: UnadaptedNlls,
}

impl<'a, B: Backend> Vanilla<'a, B> {
    /// The plain model.
    pub fn new(model: &'a AuxModel<B>) -> Self {
        Self::with_cache(model, UnadaptedNlls::default())
    }

    /// The plain model, reading a block's NLLs from `cache` when they are there (put there, e.g.,
    /// by the first pass of a TinT engine that ran on the block before) and computing them with
    /// its own forward pass otherwise.
    pub fn with_cache(model: &'a AuxModel<B>, cache: UnadaptedNlls) -> Self {
        Self { model, cache }
    }
}

impl<B: Backend> LmMethod for Vanilla<'_, B> {
    fn name(&self) -> String {
        "vanilla".into()
    }

    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        let cached = lock(&self.cache).get(block).cloned();
        let nll = match cached {
            Some(nll) => nll,
            None => {
                let device = self.model.devices()[0].clone();
                let ids = block_ids::<B>(block, &device);
                // NLL of tokens 1..T, i.e. every target a train fraction can ask for.
                let nll = continuation_nll(self.model, ids, 1)?.remove(0);
                lock(&self.cache).insert(block.to_vec(), nll.clone());
                nll
            }
        };
        // nll[k] is the NLL of token k + 1; targets train_len..T are nll[train_len - 1..].
        Ok(BlockNll {
            sum_nll: nll[train_len - 1..].iter().sum(),
            count: block.len() - train_len,
        })
    }

    fn non_finite_origin(&mut self, _block: &[u32], _train_len: usize) -> NonFiniteOrigin {
        weights_origin(self.model).unwrap_or(NonFiniteOrigin::Forward)
    }

    fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
        Some(Box::new(self.clone()))
    }
}

/// The cache, also after a thread panicked while holding it (its entries are whole values).
fn lock(cache: &UnadaptedNlls) -> std::sync::MutexGuard<'_, HashMap<Vec<u32>, Vec<f64>>> {
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Dynamic evaluation: `steps` SGD steps on the MEAN next-token loss of the training part (all
/// parameters, exact gradients, as the paper's baseline), then the updated model scores the rest.
#[derive(Clone)]
pub struct DynEval<'a, B: AutodiffBackend> {
    /// The auxiliary model (never modified).
    pub model: &'a AuxModel<B>,
    /// Learning rate on the mean loss; `None` = matched to TinT: `inner_lr × (train_len − 1)`.
    pub lr: Option<f64>,
    /// TinT's inner learning rate on the summed loss, used for the matched step.
    pub inner_lr: f64,
    /// SGD steps.
    pub steps: usize,
    /// Train only the top `k` blocks (and the final norm), as TinT with `n_simulation_layers = k`;
    /// `None` = every parameter (the paper's baseline).
    pub top_layers: Option<usize>,
    /// Train only the parameter groups a TinT step updates ([`tint_updated_params`]) within
    /// `top_layers`: the matched baseline `dyn-eval-matched`.
    pub tint_params_only: bool,
}

/// The parameters a TinT step moves, as a dynamic-evaluation selection (defined in `tint-sim`,
/// beside the step).
pub use tint_sim::tint_updated_params;

impl<'a, B: AutodiffBackend> DynEval<'a, B> {
    /// The learning rate used for a block with `train_len` training tokens: the mean loss over
    /// `train_len − 1` targets with step `lr` equals the summed loss with step `lr / (train_len − 1)`.
    pub fn lr_for(&self, train_len: usize) -> f64 {
        self.lr.unwrap_or(self.inner_lr * (train_len - 1) as f64)
    }

    /// This method keeping each block's one-step gradient in `gradients`, shared with the
    /// methods of the other step sizes of a tuning grid ([`SharingGradients`]).
    pub fn sharing_gradients(
        self,
        gradients: StepReuse<SgdGradient<B>>,
    ) -> SharingGradients<'a, B> {
        SharingGradients {
            method: self,
            gradients,
        }
    }

    /// [`LmMethod::block_nll`], the step's gradient taken from `gradients` (or kept there) when
    /// there is one step.
    fn block_nll_sharing(
        &self,
        block: &[u32],
        train_len: usize,
        gradients: Option<&StepReuse<SgdGradient<B>>>,
    ) -> Result<BlockNll, EvalError> {
        let device = self.model.devices()[0].clone();
        let ids = block_ids::<B>(block, &device);
        let config = DynEvalConfig {
            lr: self.lr_for(train_len),
            steps: self.steps,
            params: match (self.tint_params_only, self.top_layers) {
                (true, layers) => tint_updated_params(self.model, layers),
                (false, Some(k)) => tint_aux::ParamSelection::top_layers(k),
                (false, None) => tint_aux::ParamSelection::all(),
            },
            ..Default::default()
        };
        let model = self.model;
        let outcome = dynamic_eval_with(model, ids, train_len, |train_ids| match gradients {
            Some(gradients) if config.steps == 1 => {
                // Everything the gradient depends on: the trained parameters, the loss (every
                // target of the training part) and its reduction, the tokens.
                let key = StepKey {
                    settings: format!(
                        "lm dyn-eval {:?} {:?} {:?}",
                        config.params, config.loss_mask, config.reduction
                    ),
                    ids: vec![block[..train_len].to_vec()],
                    targets: Vec::new(),
                };
                gradients
                    .get_or_compute(key, || sgd_gradient(model, train_ids, &config).map(Rc::new))?
                    .step(config.lr)
            }
            _ => sgd_update(model, train_ids, &config),
        })?;
        Ok(BlockNll {
            sum_nll: outcome.eval_nll[0].iter().sum(),
            count: outcome.eval_nll[0].len(),
        })
    }
}

impl<B: AutodiffBackend> LmMethod for DynEval<'_, B> {
    fn name(&self) -> String {
        if self.tint_params_only {
            "dyn-eval-matched".into()
        } else {
            "dyn-eval".into()
        }
    }

    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        self.block_nll_sharing(block, train_len, None)
    }

    /// The weights; else the unadapted model's NLL of the same targets: finite means the SGD
    /// update made it non-finite.
    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        let base = self.model.valid();
        let device = base.devices()[0].clone();
        let unadapted = continuation_nll(&base, block_ids(block, &device), train_len)
            .map(|nll| nll[0].iter().all(|v| v.is_finite()))
            .unwrap_or(false);
        adapted_origin(&base, unadapted, || {
            format!(
                "dynamic evaluation: lr {:e} on the mean loss, {} step(s)",
                self.lr_for(train_len),
                self.steps
            )
        })
    }

    /// The step: learning rate (or the matched rule with TinT's `η`), steps, trained parameters.
    fn settings(&self) -> String {
        format!(
            "{}: lr {:?}, inner_lr {:e}, steps {}, top_layers {:?}, tint_params_only {}",
            self.name(),
            self.lr,
            self.inner_lr,
            self.steps,
            self.top_layers,
            self.tint_params_only
        )
    }

    fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
        Some(Box::new(self.clone()))
    }
}

/// Dynamic evaluation that keeps each block's one-step gradient in a [`StepReuse`] shared with
/// the methods built for the other step sizes of a tuning grid ([`crate::step_reuse`]): scored
/// block by block across the grid ([`crate::lm_tune::tune_lm`]), every block is differentiated
/// once instead of once per step size. Its NLLs equal [`DynEval`]'s to the bit (the step of a
/// kept gradient is the step computed afresh: `tint-aux`'s tests); more than one step computes
/// afresh. Scores its blocks on one thread (no [`LmMethod::fork`]: the kept gradients stay on it).
pub struct SharingGradients<'a, B: AutodiffBackend> {
    method: DynEval<'a, B>,
    gradients: StepReuse<SgdGradient<B>>,
}

impl<B: AutodiffBackend> LmMethod for SharingGradients<'_, B> {
    fn name(&self) -> String {
        self.method.name()
    }

    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        self.method
            .block_nll_sharing(block, train_len, Some(&self.gradients))
    }

    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        self.method.non_finite_origin(block, train_len)
    }

    fn settings(&self) -> String {
        self.method.settings()
    }
}

/// TinT's functional reference keeping each block's descent direction in a [`StepReuse`] shared
/// with the methods built for the other step sizes of a tuning grid ([`crate::step_reuse`]):
/// scored block by block across the grid ([`crate::lm_tune::tune_lm`]), every block runs one
/// first pass and backward pass instead of a whole step per step size, and each step size one
/// plain forward of its updated model ([`StepDirection::updated`]). Its NLLs equal [`Tint`]'s to
/// the bit (`tests/all/methods.rs`). Made by [`Tint::sharing_directions`] only where the engine
/// gives directions; scores its blocks on one thread (no [`LmMethod::fork`]).
pub struct SharingDirections<B: Backend> {
    method: Tint<B>,
    directions: StepReuse<dyn StepDirection<B>>,
}

impl<B: Backend> Tint<B> {
    /// This method taking each block's descent direction from `directions` (or keeping it there)
    /// where the engine gives directions ([`Self::gives_directions`]); else this method back.
    ///
    /// # Errors
    /// `self` where the engine gives no directions.
    pub fn sharing_directions(
        self,
        directions: StepReuse<dyn StepDirection<B>>,
    ) -> Result<SharingDirections<B>, Box<Self>> {
        if self.gives_directions() {
            Ok(SharingDirections {
                method: self,
                directions,
            })
        } else {
            Err(Box::new(self))
        }
    }
}

impl<B: Backend> LmMethod for SharingDirections<B> {
    fn name(&self) -> String {
        self.method.name()
    }

    /// # Shapes
    /// `block`: `T` token ids, trained on the first `train_len`; the step's input `[1, T]`.
    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        let tint = &self.method;
        let ids = block_ids::<B>(block, &tint.device);
        let input = SimInput::with_train_lengths(ids.clone(), &[train_len])?;
        // Everything the direction depends on: the step without its size, the tokens and the
        // training part.
        let mut step = tint.engine.step().clone();
        let inner_lr = step.inner_lr;
        step.inner_lr = 0.0;
        let key = StepKey {
            settings: format!(
                "lm tint-ref {step:?}, official_compat {}",
                tint.official_compat
            ),
            ids: vec![block.to_vec()],
            targets: vec![(0..block.len()).map(|t| t < train_len).collect()],
        };
        let direction = self.directions.get_or_compute(key, || {
            tint.direction(std::slice::from_ref(&input)).map(Rc::from)
        })?;
        let logits = direction.updated(inner_lr).logits(ids.clone())?;
        eval_part_nll(logits, ids, train_len)
    }

    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        self.method.non_finite_origin(block, train_len)
    }

    fn settings(&self) -> String {
        self.method.settings()
    }
}

/// The TinT method names of the evaluations, in the order of [`Engine::ALL`]: the constructed
/// simulator (`tint`), its structured execution (`tint-structured`, proven equal to the
/// constructed one) and the functional reference (`tint-ref`, the same update with plain tensor
/// maths).
pub const TINT_METHOD_NAMES: [&str; 3] = ["tint", "tint-structured", "tint-ref"];

/// The method name of the engine that runs it.
pub fn tint_method_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Simulator(Execution::Constructed) => TINT_METHOD_NAMES[0],
        Engine::Simulator(Execution::Structured) => TINT_METHOD_NAMES[1],
        Engine::Reference => TINT_METHOD_NAMES[2],
    }
}

/// The engine of a TinT method name.
///
/// # Errors
/// [`EvalError::UnknownMethod`] listing the valid names.
pub fn parse_tint_method(name: &str) -> Result<Engine, EvalError> {
    Engine::ALL
        .into_iter()
        .find(|&engine| tint_method_name(engine) == name)
        .ok_or_else(|| EvalError::UnknownMethod {
            name: name.to_string(),
            known: TINT_METHOD_NAMES.join(", "),
        })
}

/// TinT: one forward pass of the simulator (or of its functional reference) trains on the block's
/// training part with `config.step.inner_lr` on the SUMMED loss and scores the rest. Clones share
/// the engine.
#[derive(Clone)]
pub struct Tint<B: Backend> {
    /// The engine, built by [`tint_sim::build`] (shared by the forks).
    engine: Arc<dyn TintStep<B>>,
    device: B::Device,
    /// The auxiliary model (a cheap handle copy), to find a non-finite weight.
    model: AuxModel<B>,
    /// Where the per-target NLLs of each block's first pass (the unadapted model) go, for a
    /// [`Vanilla`] that reads them instead of running its own forward pass.
    first_pass: Option<UnadaptedNlls>,
    /// The step keeps the loss gradient of the sequence's last position (the official code's
    /// quirk, docs/construction.md §12): the update then depends on what ends the sequence.
    official_compat: bool,
    /// A simulator's construction (sizes, norm epsilon, module reuse, gates), which shapes its
    /// float32 rounding: part of [`LmMethod::settings`], so a cell is taken (`--resume`,
    /// `--cells-from`) only from a network built the same way. `None` for the reference.
    construction: Option<String>,
}

impl<B: Backend> Tint<B> {
    /// The TinT method run by `engine` for `model` ([`tint_sim::build`]; a simulator replaces
    /// `config.execution` with the engine's execution).
    ///
    /// # Errors
    /// The construction errors of the engine ([`EvalError::Sim`]).
    pub fn for_method(
        model: &AuxModel<B>,
        config: TintConfig,
        engine: Engine,
    ) -> Result<Self, EvalError> {
        Ok(Self {
            engine: Arc::from(tint_sim::build(model, &config, engine, None)?),
            device: model.devices()[0].clone(),
            model: model.clone(),
            first_pass: None,
            official_compat: config.official_compat,
            construction: matches!(engine, Engine::Simulator(_)).then(|| {
                format!(
                    "Ds {}, P {}, Hs {}, epsilon {:e}, reuse forward {} backward {}, gates {:?} \
                     x{}",
                    config.hidden_size,
                    config.num_prefixes,
                    config.num_heads,
                    config.epsilon,
                    config.reuse_forward_blocks,
                    config.reuse_backward_blocks,
                    config.gate_mode,
                    config.gate_scale
                )
            }),
        })
    }

    /// This method, also putting the per-target NLLs of every block's first pass into `cache`:
    /// that pass is the unadapted model's forward (the weights before the step), so a [`Vanilla`]
    /// reading `cache` ([`Vanilla::with_cache`]) scores a block without a forward pass of its own
    /// once this method has run on it. (The functional reference's first pass is its own code, not
    /// the auxiliary model's forward: the two agree to float32 rounding, tested in
    /// `tests/all/methods.rs`.)
    pub fn recording_first_pass(mut self, cache: UnadaptedNlls) -> Self {
        self.first_pass = Some(cache);
        self
    }

    /// The constructed simulator for `model`, evaluated with `config.execution`.
    ///
    /// # Errors
    /// As [`Tint::for_method`].
    pub fn simulator(model: &AuxModel<B>, config: TintConfig) -> Result<Self, EvalError> {
        let engine = Engine::Simulator(config.execution);
        Self::for_method(model, config, engine)
    }

    /// The functional reference for `model`.
    ///
    /// # Errors
    /// As [`Tint::for_method`].
    pub fn reference(model: &AuxModel<B>, config: TintConfig) -> Result<Self, EvalError> {
        Self::for_method(model, config, Engine::Reference)
    }

    /// The engine that runs this method.
    pub fn engine(&self) -> Engine {
        self.engine.engine()
    }

    /// The auxiliary model it was built from.
    pub fn model(&self) -> &AuxModel<B> {
        &self.model
    }

    /// Where non-finite final logits of `output` came from: a weight; else the first pass (the
    /// unadapted model), when its logits are already non-finite; else the simulated update.
    pub fn origin_of(&self, output: &SimOutput<B>) -> NonFiniteOrigin {
        adapted_origin(&self.model, all_finite(&output.first_logits), || {
            format!(
                "{}: inner_lr {:e}, {} simulated step(s)",
                tint_method_name(self.engine()),
                self.engine.step().inner_lr,
                self.engine.step().n_forward_backward
            )
        })
    }

    /// First-pass and final logits of one `[1, T]` block.
    pub fn run(&self, input: &SimInput<B>) -> Result<SimOutput<B>, EvalError> {
        Ok(self.engine.forward(input)?)
    }

    /// Whether [`Self::train_once`] gives a model: the engine hands out its updated weights (the
    /// functional reference, [`TintStep::updated`]) and the step is not `official_compat` (whose
    /// kept last-position gradient makes the update of a training part depend on the tokens
    /// after it, so training on the part alone would give another update:
    /// `tint-sim/tests/all/query_independence.rs`).
    pub fn trains_once(&self) -> bool {
        !self.official_compat && self.engine.engine() == Engine::Reference
    }

    /// The step on `input` (one sequence, `[1, T]`, whose training part is the whole of what
    /// it trains on) and the updated model it leaves, for scoring other sequences that continue
    /// the training part by plain forwards; `None` where [`Self::trains_once`] is false.
    ///
    /// # Errors
    /// The engine's errors ([`EvalError::Sim`]).
    pub fn train_once(
        &self,
        input: &SimInput<B>,
    ) -> Option<Result<Box<dyn UpdatedModel<B>>, EvalError>> {
        if !self.trains_once() {
            return None;
        }
        let updated = self.engine.updated(input)?;
        Some(updated.map(|(_, model)| model).map_err(EvalError::from))
    }
}

/// The steps kept beside a TinT step, which its memory admission ([`Tint::admit_steps`]) counts
/// with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeptSteps {
    /// Descent directions of earlier steps of this method (for a grid's other step sizes and the
    /// seeds' cells), each the updated weights' size.
    pub directions: usize,
    /// Bytes another method keeps at the same time (`eval icl`: dynamic evaluation's gradients).
    pub other_bytes: u64,
}

impl<B: Backend> Tint<B> {
    /// Refuses `parallel` steps at once, each on sequences of `seq_lengths` (one after another)
    /// with the steps `kept` beside it, whose memory estimate ([`TintStep::step_memory`] with
    /// them, `parallel` times, the other method's bytes once) is over `limit` bytes: the error
    /// names `what` runs, the estimate's parts and `flag`, which raises the limit. Admits every
    /// step of an engine without an estimate.
    ///
    /// # Errors
    /// [`EvalError::Aux`] with [`tint_aux::AuxError::MemoryOverLimit`].
    pub fn admit_steps(
        &self,
        seq_lengths: &[usize],
        parallel: usize,
        kept: KeptSteps,
        limit: u64,
        what: &str,
        flag: &str,
    ) -> Result<(), EvalError> {
        let Some(memory) = self.engine.step_memory(seq_lengths) else {
            return Ok(());
        };
        let memory = memory
            .with_kept_directions(kept.directions)
            .times(parallel.max(1))
            .with_kept_beside(kept.other_bytes);
        memory.admit(
            &format!("{}'s step on {what}", tint_method_name(self.engine())),
            limit,
            flag,
        )?;
        Ok(())
    }

    /// The bytes of one descent direction of the step ([`TintStep::direction`]: the updated
    /// weights' size, as its memory estimate counts it); 0 for an engine without an estimate.
    pub fn direction_bytes(&self) -> u64 {
        self.engine
            .step_memory(&[1])
            .map_or(0, |memory| memory.direction_bytes())
    }

    /// The step size `η` of the step.
    pub fn inner_lr(&self) -> f64 {
        self.engine.step().inner_lr
    }

    /// Whether [`Self::direction`] gives a direction: the engine trains once and gives them
    /// (the LLaMA functional reference, one forward-backward pass) — also what lets TinT train
    /// in the Single format (each demonstration an input of its own).
    pub fn gives_directions(&self) -> bool {
        self.trains_once() && self.engine.gives_directions()
    }

    /// The descent direction of the step on the summed loss of `inputs` (each one sequence),
    /// which gives [`Self::train_once`]'s model at any step size ([`tint_sim::StepDirection`]).
    ///
    /// # Errors
    /// The engine's errors ([`EvalError::Sim`]); [`EvalError::InvalidSetting`] where
    /// [`Self::gives_directions`] is false.
    pub fn direction(
        &self,
        inputs: &[SimInput<B>],
    ) -> Result<Box<dyn StepDirection<B>>, EvalError> {
        let no_direction = || EvalError::InvalidSetting {
            name: "tint engine",
            value: format!("{:?}", self.engine.engine()),
            rule: "gives a step direction only as the functional reference of a one-pass step \
                   without official_compat"
                .into(),
        };
        if !self.gives_directions() {
            return Err(no_direction());
        }
        self.engine
            .direction(inputs)
            .ok_or_else(no_direction)?
            .map_err(EvalError::from)
    }
}

impl<B: Backend> LmMethod for Tint<B> {
    fn name(&self) -> String {
        tint_method_name(self.engine()).into()
    }

    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        let ids = block_ids::<B>(block, &self.device);
        let input = SimInput::with_train_lengths(ids.clone(), &[train_len])?;
        let output = self.run(&input)?;
        if let Some(cache) = &self.first_pass {
            // Every target 1..T, as `Vanilla` stores its own forward's.
            let nll =
                continuation_nll_of_logits(output.first_logits.clone(), ids.clone(), 1)?.remove(0);
            lock(cache).insert(block.to_vec(), nll);
        }
        eval_part_nll(output.final_logits, ids, train_len)
    }

    /// Runs the block again and looks at its first-pass logits ([`Tint::origin_of`]).
    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        let ids = block_ids::<B>(block, &self.device);
        SimInput::with_train_lengths(ids, &[train_len])
            .map_err(EvalError::from)
            .and_then(|input| self.run(&input))
            .map(|output| self.origin_of(&output))
            .unwrap_or_else(|_| weights_origin(&self.model).unwrap_or(NonFiniteOrigin::Unknown))
    }

    /// The engine and its whole step (layers, steps, `η`, derivatives, loss gradient), and a
    /// simulator's construction (its sizes).
    fn settings(&self) -> String {
        let construction = self
            .construction
            .as_ref()
            .map_or(String::new(), |c| format!(", constructed with {c}"));
        format!(
            "{}: {:?}, official_compat {}{construction}",
            self.name(),
            self.engine.step(),
            self.official_compat
        )
    }

    fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
        Some(Box::new(self.clone()))
    }
}

/// A method under another name, e.g. `dyn-eval eta=1e-4 6x2` for one point of a learning-rate and
/// budget grid.
pub struct Labelled<M> {
    /// The name in reports.
    pub label: String,
    /// The method.
    pub method: M,
}

impl<M: LmMethod> LmMethod for Labelled<M> {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        self.method.block_nll(block, train_len)
    }

    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        self.method.non_finite_origin(block, train_len)
    }

    fn settings(&self) -> String {
        format!("{}: {}", self.label, self.method.settings())
    }

    fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
        let method = self.method.fork()?;
        Some(Box::new(Labelled {
            label: self.label.clone(),
            method,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tint_method_names_round_trip_and_unknown_names_list_the_valid_ones() {
        for engine in Engine::ALL {
            assert_eq!(parse_tint_method(tint_method_name(engine)).unwrap(), engine);
        }
        assert_eq!(
            Engine::ALL.map(tint_method_name),
            TINT_METHOD_NAMES,
            "the names follow Engine::ALL"
        );
        assert_eq!(
            Engine::CONSTRUCTED.execution(),
            Some(Execution::Constructed)
        );
        assert_eq!(Engine::STRUCTURED.execution(), Some(Execution::Structured));
        assert_eq!(Engine::Reference.execution(), None);
        let err = parse_tint_method("tint-constructed")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tint-constructed") && err.contains("tint, tint-structured, tint-ref"),
            "{err}"
        );
    }
}
