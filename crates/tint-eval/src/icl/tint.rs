//! TinT as an in-context classification method: one forward pass of the simulator (or its functional
//! reference) trains the simulated auxiliary model on the demonstrations at the start of the input and
//! scores the label words after the query with the updated model.
//!
//! TinT reads its training data from the same input, so it supports the Multi format (demonstrations
//! and query in one sequence) and zero-shot (training on the query's own context). The Single
//! format (each demonstration an input of its own, trained on the same weights with their
//! gradients summed — what the official code's demonstration masks and restarted positions
//! compute — and the query scored without demonstrations) needs the step's descent direction
//! ([`Tint::gives_directions`]: the LLaMA functional reference); other engines refuse it.
//! Calibration follows the same rule: the prior
//! `P(c | prompt)` is scored with the demonstrations (k-shot) or the prompt itself (zero-shot) as the
//! training part.
//!
//! With k > 0 demonstrations the update does not depend on the query (the loss is on the
//! demonstrations only: `tint-sim/tests/all/query_independence.rs`), so the functional reference
//! (`tint-ref`) trains once per demonstration prefix — on the prefix alone, with the same loss
//! targets — and scores every query with the updated model by plain forwards
//! ([`tint_sim::UpdatedModel`]; on LLaMA models the updated weights in the model's own forward,
//! reusing the demonstrations' keys and values across the queries), instead of rerunning the whole step (first forward, backward,
//! final forward) per query. The update is kept with the prefix tokens and targets it was trained
//! on and used only for a context that starts with exactly that prefix; any other prefix (a long
//! query that leaves room for fewer demonstrations, the next seed) trains anew. The simulators,
//! `official_compat` steps and zero-shot (which trains on each query's own context) run the
//! whole step per query.

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};
use std::rc::Rc;
use tint_aux::{AuxModel, PrefixCache};
use tint_sim::{SimInput, SimOutput, StepDirection, UpdatedModel};

use super::method::{
    candidate_batch, next_token_log_probs, padded_ids, score_candidates, sum_candidate_log_probs,
    IclMethod, ScoreRequest,
};
use super::prompt::{DemoFormat, TrainingSequences};
use crate::methods::{KeptSteps, Tint};
use crate::non_finite::{weights_origin, NonFiniteOrigin};
use crate::step_reuse::{HeldBytes, StepKey, StepReuse};
use crate::EvalError;

/// TinT (simulator or functional reference) behind [`IclMethod`].
pub struct TintIcl<B: Backend> {
    /// The constructed TinT.
    pub tint: Tint<B>,
    /// Name in reports (e.g. `tint(eta=1e-5)`).
    pub label: String,
    device: B::Device,
    /// Train once per demonstration prefix where the engine can ([`Tint::trains_once`]).
    train_once: bool,
    /// The update of the last demonstration prefix trained once, or of the last Single-format
    /// adaptation.
    trained: Option<TrainedPrefix<B>>,
    /// `trained` is the adaptation to Single-format demonstrations (scored contexts hold none).
    trained_apart: bool,
    /// Updates trained once so far.
    updates_trained: usize,
    /// Positions the key/value caches of earlier updates reused.
    positions_reused_before: usize,
    /// The descent direction shared with the methods of the other step sizes of a grid, and
    /// this method's settings without its step size (the key's settings).
    reuse: Option<(StepReuse<dyn StepDirection<B>>, String)>,
    /// Bytes a training step may need at most ([`Tint::admit_steps`]); `None`: no limit.
    memory_limit: Option<u64>,
    /// What another method keeps at the same time, counted beside each step
    /// ([`Self::with_kept_beside`]).
    kept_beside: Option<HeldBytes>,
}

/// An update trained once on a demonstration prefix, with what it was trained on.
struct TrainedPrefix<B: Backend> {
    /// The prefix's tokens.
    ids: Vec<u32>,
    /// Its loss targets.
    targets: Vec<bool>,
    /// The updated model.
    model: Box<dyn UpdatedModel<B>>,
    /// The same weights in the auxiliary model's own forward, where they map back onto it (LLaMA):
    /// single-token label words are then scored reusing the keys and values of the
    /// demonstrations every query of the prefix shares ([`Self::cache`]).
    aux: Option<AuxModel<B>>,
    /// Keys and values of the last context `aux` scored.
    cache: PrefixCache<B>,
}

impl<B: Backend> TintIcl<B> {
    /// Wraps a TinT built by [`Tint::simulator`] or [`Tint::reference`] for a model on `device`.
    /// A functional reference trains once per demonstration prefix (the module documentation).
    pub fn new(tint: Tint<B>, label: impl Into<String>, device: &B::Device) -> Self {
        Self {
            tint,
            label: label.into(),
            device: device.clone(),
            train_once: true,
            trained: None,
            trained_apart: false,
            updates_trained: 0,
            positions_reused_before: 0,
            reuse: None,
            memory_limit: None,
            kept_beside: None,
        }
    }

    /// Refuses, before it allocates, a training step whose memory estimate is over `limit`
    /// bytes ([`Tint::admit_steps`]).
    pub fn with_memory_limit(mut self, limit: u64) -> Self {
        self.memory_limit = Some(limit);
        self
    }

    /// [`Tint::admit_steps`] for one step on training sequences of `seq_lengths` under the
    /// limit, if any, with the directions kept for the grid's other step sizes and the seed's
    /// cell beside it (all but one of the shared [`StepReuse`]'s slots: this step's own
    /// direction is counted with the step).
    fn admit_step(&self, seq_lengths: &[usize]) -> Result<(), EvalError> {
        let Some(limit) = self.memory_limit else {
            return Ok(());
        };
        let longest = seq_lengths.iter().max().copied().unwrap_or(0);
        let what = format!(
            "{} training sequence(s) of up to {longest} positions",
            seq_lengths.len()
        );
        let kept = KeptSteps {
            directions: self
                .reuse
                .as_ref()
                .map_or(0, |(reuse, _)| reuse.capacity() - 1),
            other_bytes: self.kept_beside.as_ref().map_or(0, HeldBytes::get),
        };
        self.tint
            .admit_steps(seq_lengths, 1, kept, limit, &what, "--max-memory-gib")
    }

    /// This method taking the descent direction of a demonstration prefix from `reuse` when a
    /// method of another step size computed it with the same `settings` (the method's settings
    /// without its step size; [`crate::step_reuse`]). Only where the engine gives directions
    /// (the LLaMA functional reference, one step) and the method trains once.
    pub fn with_step_reuse(
        mut self,
        reuse: StepReuse<dyn StepDirection<B>>,
        settings: impl Into<String>,
    ) -> Self {
        self.reuse = Some((reuse, settings.into()));
        self
    }

    /// This method's step admission counting what another method's reuse holds at the time
    /// (`eval icl`: dynamic evaluation's kept gradients, resident while TinT steps).
    pub fn with_kept_beside(mut self, held: HeldBytes) -> Self {
        self.kept_beside = Some(held);
        self
    }

    /// This method running the whole step for every query (also for the functional reference):
    /// the path a train-once run is compared with.
    pub fn per_query(mut self) -> Self {
        self.train_once = false;
        self
    }

    /// Updates trained once on a demonstration prefix so far (0 on the per-query path).
    pub fn updates_trained(&self) -> usize {
        self.updates_trained
    }

    /// Context positions whose keys and values were reused from the query before, over every
    /// update (0 where the updated weights do not map back onto the auxiliary model).
    pub fn positions_reused(&self) -> usize {
        self.positions_reused_before
            + self
                .trained
                .as_ref()
                .map_or(0, |p| p.cache.reused_positions())
    }

    /// Drops the kept update (memory), counting what its cache reused.
    fn drop_update(&mut self) {
        if let Some(p) = self.trained.take() {
            self.positions_reused_before += p.cache.reused_positions();
        }
    }

    /// The model updated on `request`'s demonstration prefix, trained now unless the last one was
    /// trained on the same tokens with the same targets; `None` where the whole step runs per
    /// query (no demonstrations, or fewer than two tokens of them; an engine that cannot train
    /// once; [`Self::per_query`]).
    fn updated_for(
        &mut self,
        request: &ScoreRequest<'_>,
    ) -> Result<Option<&mut TrainedPrefix<B>>, EvalError> {
        let demo_len = request.demo_len;
        // A step needs a sequence of two tokens or more.
        if !self.train_once || !self.tint.trains_once() || demo_len < 2 {
            return Ok(None);
        }
        let ids = &request.context[..demo_len];
        // The targets the per-query step sees on the prefix (missing ones are not targets).
        let targets: Vec<bool> = (0..demo_len)
            .map(|t| request.demo_targets.get(t).copied().unwrap_or(false))
            .collect();
        let fresh = self
            .trained
            .as_ref()
            .is_some_and(|p| p.ids == ids && p.targets == targets);
        if !fresh {
            // Drop the old update before training the new one (memory).
            self.drop_update();
            let input = self.training_input(ids, &targets)?;
            let Some(model) = self.updated_on(ids, &targets, &input)? else {
                return Ok(None);
            };
            let aux = self.in_aux(model.as_ref())?;
            self.trained = Some(TrainedPrefix {
                ids: ids.to_vec(),
                targets,
                model,
                aux,
                cache: PrefixCache::default(),
            });
            self.updates_trained += 1;
        }
        Ok(self.trained.as_mut())
    }

    /// The step's input for one training sequence `ids` with loss `targets`.
    ///
    /// # Shapes
    /// `[1, ids.len()]`.
    fn training_input(&self, ids: &[u32], targets: &[bool]) -> Result<SimInput<B>, EvalError> {
        let ids_tensor = padded_ids::<B>(&[ids.to_vec()], ids[0], &self.device);
        let gradient_mask = Tensor::<B, 2, Bool>::from_data(
            TensorData::new(targets.to_vec(), [1, ids.len()]),
            &self.device,
        );
        Ok(SimInput::with_train_lengths(ids_tensor, &[ids.len()])
            .map_err(EvalError::from)?
            .with_gradient_mask(gradient_mask))
    }

    /// The model updated on the summed loss of `inputs` (the sequences `ids` with `targets`)
    /// from the step's descent direction, shared with the other step sizes of a grid through
    /// [`Self::with_step_reuse`]. Only where the engine gives directions.
    fn updated_by_direction(
        &self,
        ids: Vec<Vec<u32>>,
        targets: Vec<Vec<bool>>,
        inputs: &[SimInput<B>],
    ) -> Result<Box<dyn UpdatedModel<B>>, EvalError> {
        let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
        self.admit_step(&lengths)?;
        let compute = || self.tint.direction(inputs).map(Rc::from);
        let direction = match &self.reuse {
            Some((reuse, settings)) => {
                let key = StepKey {
                    settings: settings.clone(),
                    ids,
                    targets,
                };
                reuse.get_or_compute_sized(key, self.tint.direction_bytes(), compute)?
            }
            None => compute()?,
        };
        Ok(direction.updated(self.tint.inner_lr()))
    }

    /// The model updated on one training sequence `input` (`ids` with `targets`): from the
    /// step's direction where the engine gives one, else from the engine's own step; `None` where
    /// the engine trains neither way.
    fn updated_on(
        &self,
        ids: &[u32],
        targets: &[bool],
        input: &SimInput<B>,
    ) -> Result<Option<Box<dyn UpdatedModel<B>>>, EvalError> {
        if self.tint.gives_directions() {
            let inputs = std::slice::from_ref(input);
            return self
                .updated_by_direction(vec![ids.to_vec()], vec![targets.to_vec()], inputs)
                .map(Some);
        }
        self.admit_step(&[ids.len()])?;
        self.tint.train_once(input).transpose()
    }

    /// The same weights as `model` in the auxiliary model, where they map back onto it.
    fn in_aux(&self, model: &dyn UpdatedModel<B>) -> Result<Option<AuxModel<B>>, EvalError> {
        model
            .to_aux(self.tint.model())
            .transpose()
            .map_err(EvalError::from)
    }
}

impl<B: Backend> IclMethod for TintIcl<B> {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn trains(&self) -> bool {
        true
    }

    /// The Multi format; the Single format (each demonstration an input of its own, trained on
    /// the same weights, their gradients summed: the official code's demonstration masks and
    /// restarted positions) where the engine gives descent directions.
    fn supports(&self, format: DemoFormat) -> bool {
        format == DemoFormat::Multi || self.tint.gives_directions()
    }

    fn adapt(&mut self, train: &TrainingSequences) -> Result<(), EvalError> {
        // A new adaptation: no update of the last one is reused (nor kept in memory).
        self.drop_update();
        self.trained_apart = false;
        if train.format == Some(DemoFormat::Single)
            && !train.is_empty()
            && self.tint.gives_directions()
        {
            let inputs = train
                .ids
                .iter()
                .zip(&train.targets)
                .map(|(ids, targets)| self.training_input(ids, targets))
                .collect::<Result<Vec<_>, _>>()?;
            let model =
                self.updated_by_direction(train.ids.clone(), train.targets.clone(), &inputs)?;
            let aux = self.in_aux(model.as_ref())?;
            self.trained = Some(TrainedPrefix {
                ids: Vec::new(),
                targets: Vec::new(),
                model,
                aux,
                cache: PrefixCache::default(),
            });
            self.trained_apart = true;
            self.updates_trained += 1;
            return Ok(());
        }
        if (train.format == Some(DemoFormat::Single) && !train.is_empty()) || train.ids.len() > 1 {
            return Err(EvalError::InvalidSetting {
                name: "format",
                value: "single".into(),
                rule: "this TinT engine trains inside its forward pass on one input (the single \
                       format needs descent directions: the functional reference of a LLaMA \
                       model with one step); use the multi format"
                    .into(),
            });
        }
        Ok(())
    }

    fn score(&mut self, request: &ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
        let context = request.context;
        let (ids, single_token) = self.scored_ids(request);
        let trained = if self.trained_apart {
            self.trained.as_mut()
        } else {
            self.updated_for(request)?
        };
        let logits = match trained {
            Some(TrainedPrefix {
                aux: Some(aux),
                cache,
                ..
            }) if single_token => {
                return score_candidates(aux, context, request.candidates, Some(cache));
            }
            Some(trained) => trained.model.logits(ids.clone()).map_err(EvalError::from)?,
            None => self.forward(request)?.0.final_logits,
        };
        if single_token {
            return next_token_log_probs(logits, context.len(), request.candidates);
        }
        sum_candidate_log_probs(logits, ids, context.len(), request.candidates)
    }

    /// Runs `request` again and looks at its first-pass logits ([`Tint::origin_of`]).
    fn non_finite_origin(&mut self, request: Option<&ScoreRequest<'_>>) -> NonFiniteOrigin {
        let weights = || weights_origin(self.tint.model()).unwrap_or(NonFiniteOrigin::Unknown);
        match request.map(|r| self.forward(r)) {
            Some(Ok((output, _, _))) => self.tint.origin_of(&output),
            _ => weights(),
        }
    }
}

impl<B: Backend> TintIcl<B> {
    /// The simulator's output for `request`, the ids it ran on, and whether the candidates are all
    /// single tokens (scored from the context alone).
    #[allow(clippy::type_complexity)]
    fn forward(
        &self,
        request: &ScoreRequest<'_>,
    ) -> Result<(SimOutput<B>, Tensor<B, 2, Int>, bool), EvalError> {
        let context = request.context;
        let (ids, single_token) = self.scored_ids(request);
        let [batch_size, seq_length] = ids.dims();
        // Zero-shot: the training part is the whole context (the query or the prompt itself).
        let (train_len, targets): (usize, Vec<bool>) = if request.demo_len > 0 {
            (request.demo_len, request.demo_targets.to_vec())
        } else {
            let mut all = vec![true; context.len()];
            all[0] = false;
            (context.len(), all)
        };
        let row_targets: Vec<bool> = (0..seq_length)
            .map(|t| t < targets.len() && targets[t])
            .collect();
        let gradient_mask = Tensor::<B, 2, Bool>::from_data(
            TensorData::new(row_targets.repeat(batch_size), [batch_size, seq_length]),
            &self.device,
        );
        let input = SimInput::with_train_lengths(ids.clone(), &vec![train_len; batch_size])
            .map_err(EvalError::from)?
            .with_gradient_mask(gradient_mask);
        let output = self.tint.run(&input)?;
        Ok((output, ids, single_token))
    }

    /// The ids `request` is scored on, and whether the candidates are all single tokens.
    ///
    /// # Shapes
    /// `[1, context.len()]` for single tokens, else `[candidates.len(), longest sequence]`.
    fn scored_ids(&self, request: &ScoreRequest<'_>) -> (Tensor<B, 2, Int>, bool) {
        let context = request.context;
        // Single-token label words (the usual case) are all scored from the next-token
        // distribution after the context: one sequence instead of one per candidate. The update
        // is the same (it depends only on the training part) and causal attention makes the
        // logits at the last context position independent of what follows.
        let single_token =
            !request.candidates.is_empty() && request.candidates.iter().all(|c| c.len() == 1);
        let ids = if single_token {
            padded_ids::<B>(&[context.to_vec()], context[0], &self.device)
        } else {
            candidate_batch::<B>(context, request.candidates, &self.device)
        };
        (ids, single_token)
    }
}
