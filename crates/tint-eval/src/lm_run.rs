//! A whole language-modelling run (`cargo xtask eval lm`): step sizes chosen on tuning blocks cut
//! from documents that are never evaluated ([`crate::lm_split`]), every method evaluated on the same
//! evaluation blocks, perplexities and paired per-block differences from vanilla and dynamic
//! evaluation ([`tint_lab::paired`]). Reports are written atomically after every cell; `resume` reuses
//! only cells whose fingerprint (settings, checkpoint and text SHA-256, code version) matches and
//! whose numbers validate ([`crate::resume`]).

use std::path::{Path, PathBuf};

use burn::module::AutodiffModule;
use burn::tensor::backend::{AutodiffBackend, Backend};
use tint_aux::{AuxModel, BackwardMemory, GradientMemory};
use tint_sim::{Engine, TintConfig};

use crate::documents::{file_label, sha256_documents, sha256_files, tokenized_documents};
use crate::lm::cell_inputs_sha256;
use crate::lm_donors::{
    donated_cells, donated_tuning, is_donated, read_lm_donors, DonorRules, LmDonor,
};
use crate::lm_grid::{
    build_tuning_method, shares_gradients, tuning_inputs_sha256, RowPlan, TuningReuse,
};
use crate::lm_rows::{pending_rows, PendingRow, StepSource};
use crate::lm_settings::LmRunSettings;
use crate::lm_split::{LmSplit, SplitSpec};
use crate::lm_tune::tune_lm;
use crate::method::Method;
use crate::methods::{tint_method_name, KeptSteps, Tint, UnadaptedNlls};
use crate::results_doc::write_file;
use crate::resume::{merge, Fingerprint};
use crate::run_env::RunEnv;
use crate::run_settings::check_out_extension;
use crate::tune_record::TuneRecord;
use crate::{run_lm_eval, EvalError, LmEvalConfig, LmReport, MethodResult};
use tint_lab::event::{OnEvent, RunEvent};

/// The asset that holds the State of the Union addresses (the default corpus).
pub const SOTU_ASSET: &str = "sotu";

/// The context of a non-finite value in an evaluated cell.
pub const RECORD_HINT: &str =
    "a non-finite value (pass --allow-non-finite to record such values in the report)";
/// The context of a non-finite value in every value of a tuning grid.
pub const TUNING_HINT: &str =
    "every step size of the tuning grid gave a non-finite value, so none can be chosen (give \
     --inner-lr / --lr to skip tuning; --allow-non-finite then records non-finite values)";

/// Puts `hint` ([`RECORD_HINT`], [`TUNING_HINT`]) in front of an error that is, or wraps, a
/// non-finite value; other errors pass through as they are.
pub fn non_finite_hint<E: Into<EvalError>>(hint: &'static str) -> impl FnOnce(E) -> EvalError {
    move |error| {
        let error = error.into();
        if error.is_non_finite() {
            error.context(hint)
        } else {
            error
        }
    }
}

/// Refuses, before any block runs, a run whose training steps would need more than `limit` bytes
/// by their estimates, for `workers` blocks of `--block-size` tokens at a time: dynamic
/// evaluation (`dyn-eval`, `dyn-eval-matched`; [`tint_aux::BackwardMemory`], block by block on
/// LLaMA models) and TinT's functional reference (`tint-ref`;
/// [`tint_sim::llama::ReferenceStepMemory`] on LLaMA models).
///
/// # Errors
/// [`EvalError::Aux`] with [`tint_aux::AuxError::MemoryOverLimit`]; the reference's construction
/// errors.
fn admit_step_memory<B: Backend>(
    args: &LmRunSettings,
    model: &AuxModel<B>,
    tint_config: &TintConfig,
    workers: usize,
    limit: u64,
) -> Result<(), EvalError> {
    let workers = workers.max(1);
    let flag = "--max-memory-gib (or fewer --workers)";
    let blocks = format!("{workers} block(s) of {} tokens at a time", args.block_size);
    let trains = args
        .methods
        .iter()
        .any(|m| matches!(m, Method::DynEval | Method::DynEvalMatched));
    if trains {
        BackwardMemory::of_model(model, workers, args.block_size, GradientMemory::Least).admit(
            &format!("dynamic evaluation's step on {blocks}"),
            limit,
            flag,
        )?;
    }
    if args.methods.contains(&Method::Tint(Engine::Reference)) {
        Tint::reference(model, tint_config.clone())?.admit_steps(
            &[args.block_size],
            workers,
            KeptSteps::default(),
            limit,
            &blocks,
            flag,
        )?;
    }
    Ok(())
}

/// Threads that score blocks when `--workers` is not given: every core on the CPU backend
/// (`flex`, whose single step leaves part of two cores idle: docs/performance.md "Blocks on both
/// cores"), one on a GPU backend.
pub fn default_workers(backend: &str) -> usize {
    match backend {
        "flex" => std::thread::available_parallelism().map_or(1, |n| n.get()),
        _ => 1,
    }
}

/// The evaluation's units of work per train fraction, of which the last `free_per_fraction` (the
/// blocks of a `vanilla` that reads `tint-ref`'s first passes) cost next to nothing.
#[derive(Debug, Clone, Copy)]
struct EvalUnits {
    per_fraction: usize,
    free_per_fraction: usize,
}

impl EvalUnits {
    /// Of the first `done` units (fraction by fraction, the free ones last in each), those that
    /// are not free.
    fn counted(self, done: usize) -> usize {
        if self.per_fraction == 0 {
            return done;
        }
        let paid = self.per_fraction - self.free_per_fraction;
        let (fractions, rest) = (done / self.per_fraction, done % self.per_fraction);
        fractions * paid + rest.min(paid)
    }
}

/// Whether `record` holds the step tuned at `fraction` (`per_fraction`), or the one step of a run
/// tuned at a single fraction.
fn tuned_at(record: &TuneRecord, fraction: f64, per_fraction: bool) -> bool {
    !per_fraction
        || record
            .train_fraction
            .is_some_and(|f| (f - fraction).abs() < 1e-12)
}

/// `a,b,c` from method names.
fn list_methods(methods: &[Method]) -> String {
    methods
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// What a run wrote.
#[derive(Debug, Clone)]
pub struct LmOutcome {
    /// The final report (also written as JSON).
    pub report: LmReport,
    /// The files written: the JSON, the markdown and (when every perplexity is finite) the charts.
    pub written: Vec<PathBuf>,
}

/// `OUT-paired.svg` next to `OUT.json`.
pub fn paired_svg_path(out: &Path) -> PathBuf {
    let stem = out.with_extension("");
    PathBuf::from(format!("{}-paired.svg", stem.display()))
}

/// Runs a language-modelling run and writes `<out>.json`, `<out>.md`, `<out>.svg` and
/// `<out>-paired.svg`; `on_event` receives the progress (tuning, then evaluation, with the totals
/// for an ETA) and notes.
///
/// # Errors
///
/// Invalid settings (before anything is read or written), assets, checkpoints or texts that cannot
/// be read, a stored report that does not belong to this run (`resume`), non-finite values (with
/// [`RECORD_HINT`] or [`TUNING_HINT`] in front) and failed writes.
pub fn run_lm<AB: AutodiffBackend>(
    args: &LmRunSettings,
    env: &RunEnv<'_, AB>,
    on_event: OnEvent<'_>,
) -> Result<LmOutcome, EvalError> {
    check_out_extension(&args.out, "json")?;
    let _lock = crate::output_lock::OutputLock::acquire(&args.out)?;
    // A shard runs its own train fractions and records which shard it is.
    let sharded;
    let args = match args.shard {
        Some(shard) => {
            sharded = LmRunSettings {
                train_fraction: shard.fractions(&args.train_fraction)?,
                ..args.clone()
            };
            &sharded
        }
        None => args,
    };
    let rows = pending_rows(args)?;
    let tuning_needed = rows
        .iter()
        .any(|r| matches!(r.step, StepSource::Tune { .. }));
    let Prepared {
        text_path,
        split,
        tune_docs,
        model,
        inference,
        tint_config,
        config,
        settings,
        fingerprint,
    } = prepare_run(args, env, tuning_needed, on_event)?;
    let (stored_cells, stored_tuning) = stored_report(args, &fingerprint, on_event)?;
    let donors = cell_donors(args, &fingerprint, env.backend, &config, on_event)?;
    let write_partial = |results: Vec<MethodResult>, tuning: &[TuneRecord]| {
        LmReport {
            settings: serde_json::json!({
                "eval": &config, "run": &settings, "partial": true, "fingerprint": &fingerprint,
            }),
            results: merge(results, &stored_cells),
            paired: Vec::new(),
            tuning: tuning.to_vec(),
        }
        .write_json(&args.out)
    };

    // Step sizes are tuned at one fraction, or at every evaluated one (`--tune-per-fraction`).
    let tune_fractions: Vec<f64> = if args.tune_per_fraction {
        args.train_fraction.clone()
    } else {
        vec![args.tune_fraction]
    };
    let (tune_units, eval_work, eval_units) =
        progress_units(args, &rows, &split, tune_fractions.len());
    let mut chooser = StepChooser {
        args,
        model: &model,
        inference: &inference,
        tint_config: &tint_config,
        tune_fractions: &tune_fractions,
        tune_tokens: &split.tune_tokens(),
        tune_split: &format!("documents {}", tune_docs.join(", ")),
        stored_tuning: &stored_tuning,
        donors: &donors,
        write_partial: &write_partial,
        on_event: &mut *on_event,
        fixed_units: tune_units + eval_units,
        done: 0,
        extra_units: 0,
        tuning: Vec::new(),
    };
    let mut plans = chooser.plan_rows(rows)?;
    let (done, extra_units, tuning) = (chooser.done, chooser.extra_units, chooser.tuning);
    // Report order: the order of the methods in the settings.
    plans.sort_by_key(|p| args.methods.iter().position(|m| *m == p.method()));
    let report_order: Vec<String> = plans.iter().map(|p| p.label().to_string()).collect();
    let first_pass = if args.vanilla_from_ref {
        if !args.methods.contains(&Method::Tint(Engine::Reference)) {
            return Err(EvalError::InvalidSetting {
                name: "--vanilla-from-ref",
                value: format!("methods {}", list_methods(&args.methods)),
                rule: "vanilla reads tint-ref's first pass: add tint-ref to --methods".into(),
            });
        }
        // `tint-ref` runs first on every block, so `vanilla` finds each block's first pass.
        plans.sort_by_key(|p| p.method() == Method::Vanilla);
        Some(UnadaptedNlls::default())
    } else {
        None
    };
    let mut methods = plans
        .iter()
        .map(|p| p.build(&model, &inference, &tint_config, first_pass.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    // Grid extensions added tuning units as they happened.
    let total = tune_units + eval_units + extra_units;
    let mut finished: Vec<MethodResult> = Vec::new();
    let mut checkpoint_error = None;
    let tune_done = done;
    let eval_tokens = split.eval_tokens();
    let takeable = takeable_cells(&stored_cells, &donors, &methods, args, &eval_tokens);
    let mut report = run_lm_eval(
        &eval_tokens,
        &config,
        &mut methods,
        settings.clone(),
        &takeable,
        &mut |p| {
            on_event(RunEvent::Progress {
                done: tune_done + eval_work.counted(p.done),
                total,
                message: p.message,
            });
            if let Some(cell) = p.cell {
                finished.push(cell);
                if let Err(e) = write_partial(finished.clone(), &tuning) {
                    checkpoint_error.get_or_insert(e);
                }
            }
        },
    )
    .map_err(non_finite_hint(RECORD_HINT))?;
    note_non_finite_cells(&report, on_event);
    note_donated_cells(&report, &donors, on_event);
    if let Some(e) = checkpoint_error {
        return Err(e.context("writing the partial report"));
    }
    finish_report(
        &mut report,
        args,
        &stored_cells,
        &report_order,
        tuning,
        &fingerprint,
        &config,
    );
    let title = format!("{} on {}", args.model.identity(), file_label(&text_path));
    let written = write_lm_outputs(&report, &args.out, &title, on_event)?;
    Ok(LmOutcome { report, written })
}

/// The progress units of a run, for its ETA: the tuning blocks of every tuned row at each tuning
/// fraction (`n_tune_fractions`), the counting of evaluated blocks, and their number.
fn progress_units(
    args: &LmRunSettings,
    rows: &[PendingRow],
    split: &LmSplit,
    n_tune_fractions: usize,
) -> (usize, EvalUnits, usize) {
    // Units for the ETA: tuning blocks, then evaluated blocks.
    let tune_units: usize = rows
        .iter()
        .map(|r| match &r.step {
            StepSource::Tune { grid, .. } => grid.len() * split.tune.len() * n_tune_fractions,
            _ => 0,
        })
        .sum();
    // With `--vanilla-from-ref`, `vanilla` reads a cache (it runs after `tint-ref` in every
    // fraction): its blocks are left out of the units, so the ETA counts steps only.
    let free_rows = if args.vanilla_from_ref {
        rows.iter()
            .filter(|r| r.spec.method == Method::Vanilla)
            .count()
    } else {
        0
    };
    let eval_work = EvalUnits {
        per_fraction: rows.len() * split.eval.len(),
        free_per_fraction: free_rows * split.eval.len(),
    };
    let eval_units = eval_work.counted(rows.len() * args.train_fraction.len() * split.eval.len());
    (tune_units, eval_work, eval_units)
}

/// The cells and tuning records of the report a resumed run (`--resume`) continues: only those of
/// a report with this run's fingerprint ([`previous_report`]); none without `--resume`.
fn stored_report(
    args: &LmRunSettings,
    fingerprint: &Fingerprint,
    on_event: OnEvent<'_>,
) -> Result<(Vec<MethodResult>, Vec<TuneRecord>), EvalError> {
    let stored = if args.resume {
        previous_report(&args.out, fingerprint)?
    } else {
        None
    };
    let stored_cells = stored
        .as_ref()
        .map(|r| r.results.clone())
        .unwrap_or_default();
    let stored_tuning = stored
        .as_ref()
        .map(|r| r.tuning.clone())
        .unwrap_or_default();
    if !stored_cells.is_empty() {
        on_event(RunEvent::Note(format!(
            "resuming: {} stored cells in {}",
            stored_cells.len(),
            args.out.display()
        )));
    }
    Ok((stored_cells, stored_tuning))
}

/// The reports of `--cells-from` ([`read_lm_donors`] under this run's fingerprint, backend and
/// evaluation settings; a report of other code is left out with a note).
fn cell_donors(
    args: &LmRunSettings,
    fingerprint: &Fingerprint,
    backend: &str,
    config: &LmEvalConfig,
    on_event: OnEvent<'_>,
) -> Result<Vec<LmDonor>, EvalError> {
    let rules = DonorRules {
        out: &args.out,
        fingerprint,
        backend,
        eval: config,
    };
    read_lm_donors(&args.cells_from, &rules, &mut |n| {
        on_event(RunEvent::Note(n))
    })
}

/// The finished cells a run may take instead of computing them, in the order tried: a resumed
/// run's own (`stored`), then those of `--cells-from` whose method, fraction and digest of
/// inputs are one of this run's cells (`methods` at every fraction of `args` on `eval_tokens`).
fn takeable_cells(
    stored: &[MethodResult],
    donors: &[LmDonor],
    methods: &[Box<dyn crate::LmMethod + '_>],
    args: &LmRunSettings,
    eval_tokens: &[Vec<u32>],
) -> Vec<MethodResult> {
    if donors.is_empty() {
        // No `--cells-from`: no digests to compute here (`run_lm_eval` computes its own).
        return stored.to_vec();
    }
    let wanted: Vec<(String, f64, String)> = methods
        .iter()
        .flat_map(|m| {
            let (name, settings) = (m.name(), m.settings());
            args.train_fraction.iter().map(move |&f| {
                let digest = cell_inputs_sha256(&settings, f, args.block_size, eval_tokens);
                (name.clone(), f, digest)
            })
        })
        .collect();
    stored
        .iter()
        .cloned()
        .chain(donated_cells(donors, &wanted))
        .collect()
}

/// Notes each cell taken from a report of `--cells-from`, with its file.
fn note_donated_cells(report: &LmReport, donors: &[LmDonor], on_event: OnEvent<'_>) {
    for cell in &report.results {
        let from = donors
            .iter()
            .find(|d| d.report.results.iter().any(|c| is_donated(cell, c)));
        if let Some(donor) = from {
            on_event(RunEvent::Note(format!(
                "{} f={}: cell taken from --cells-from {} ({} blocks)",
                cell.method,
                cell.train_fraction,
                donor.path.display(),
                cell.blocks.len()
            )));
        }
    }
}

/// Notes each cell with a non-finite perplexity (recorded with `--allow-non-finite`) and how many
/// of its blocks are non-finite.
fn note_non_finite_cells(report: &LmReport, on_event: OnEvent<'_>) {
    for cell in report
        .results
        .iter()
        .filter(|c| !c.perplexity.value.is_finite())
    {
        let bad = cell
            .blocks
            .iter()
            .filter(|b| !b.sum_nll.is_finite())
            .count();
        on_event(RunEvent::Note(format!(
            "{} f={}: {bad} block(s) with a non-finite NLL recorded (--allow-non-finite)",
            cell.method, cell.train_fraction
        )));
    }
}

/// The final report from the evaluated cells: the stored cells of a resumed run merged in, the
/// report order restored (`--vanilla-from-ref` ran `vanilla` last), the tuning records, the
/// fingerprint and the paired differences.
fn finish_report(
    report: &mut LmReport,
    args: &LmRunSettings,
    stored_cells: &[MethodResult],
    report_order: &[String],
    tuning: Vec<TuneRecord>,
    fingerprint: &Fingerprint,
    config: &LmEvalConfig,
) {
    let report_results = std::mem::take(&mut report.results);
    report.results = merge(report_results, stored_cells);
    if args.vanilla_from_ref {
        // Back to the report order: by train fraction, then by row as in the settings.
        let fraction_position = |f: f64| {
            args.train_fraction
                .iter()
                .position(|&g| (g - f).abs() < 1e-12)
        };
        report.results.sort_by_key(|c| {
            (
                fraction_position(c.train_fraction),
                report_order.iter().position(|label| *label == c.method),
            )
        });
    }
    report.tuning = tuning;
    report.settings["fingerprint"] =
        serde_json::to_value(fingerprint).expect("a fingerprint always serialises");
    report.compute_paired(&tint_lab::paired::PairedSettings {
        level: config.ci_level,
        seed: config.seed,
        ..Default::default()
    });
}

/// What a language-modelling run reads before it evaluates anything: the text cut into tuning and
/// evaluation blocks, the model (checked against the block size), the TinT configuration, the
/// evaluation settings (the step's memory admitted) and the fingerprint a resumed report must match.
struct Prepared<AB: AutodiffBackend> {
    text_path: PathBuf,
    split: LmSplit,
    /// The documents the tuning blocks come from.
    tune_docs: Vec<String>,
    model: AuxModel<AB>,
    inference: AuxModel<AB::InnerBackend>,
    tint_config: TintConfig,
    config: LmEvalConfig,
    /// The run's settings as the report records them.
    settings: serde_json::Value,
    fingerprint: Fingerprint,
}

/// Reads the text (the SOTU asset unless `--text`) and the model, cuts the blocks (tuning blocks
/// only when a row tunes), checks the block size and the step's memory, and says what was read.
fn prepare_run<AB: AutodiffBackend>(
    args: &LmRunSettings,
    env: &RunEnv<'_, AB>,
    tuning_needed: bool,
    on_event: OnEvent<'_>,
) -> Result<Prepared<AB>, EvalError> {
    let text_path = match &args.text {
        Some(path) => path.clone(),
        None => env.assets.asset(SOTU_ASSET)?,
    };
    let tokenizer = args.model.tokenizer(env.assets)?;
    let (raw_docs, documents) = tokenized_documents(&text_path, &tokenizer)?;
    let split = LmSplit::new(
        &documents,
        SplitSpec {
            block_size: args.block_size,
            eval_blocks: args.max_blocks,
            tune_blocks: if tuning_needed { args.tune_blocks } else { 0 },
            tune_every: args.tune_every,
        },
    )
    .map_err(|e| e.context(format!("cutting {} into blocks", text_path.display())))?;
    let (eval_docs, tune_docs) = split.used_documents();
    on_event(RunEvent::Note(format!(
        "model {} | text {} ({} documents) | backend {} | {} evaluation blocks, {} tuning blocks \
         ({})",
        args.model.identity(),
        text_path.display(),
        documents.len(),
        env.backend,
        split.eval.len(),
        split.tune.len(),
        split.rule
    )));
    let model: AuxModel<AB> = args.model.load::<AB>(env.assets, &env.device)?;
    if args.block_size > model.max_positions() {
        return Err(EvalError::InvalidSetting {
            name: "--block-size",
            value: format!(
                "{} (the model's position table holds {})",
                args.block_size,
                model.max_positions()
            ),
            rule: "a block must fit the model's position table".into(),
        });
    }
    let inference: AuxModel<AB::InnerBackend> = model.valid();
    let tint_config = args.tint.config(&inference, 0.0, args.steps)?;
    let config = LmEvalConfig {
        block_size: args.block_size,
        train_fractions: args.train_fraction.clone(),
        allow_non_finite: args.allow_non_finite,
        workers: args.workers.unwrap_or_else(|| default_workers(env.backend)),
        ..Default::default()
    };
    admit_step_memory(
        args,
        &inference,
        &tint_config,
        config.workers,
        env.memory_limit,
    )?;
    let settings = serde_json::json!({
        "args": args,
        "model_identity": args.model.identity(),
        "text": text_path,
        "documents": documents.len(),
        "text_tokens": documents.iter().map(|d| d.tokens.len()).sum::<usize>(),
        "backend": env.backend,
        "lr_rule": "dyn-eval lr = --lr if given, else its tuned lr, else eta * (train tokens - 1) \
                    (matched step) with eta given or tuned",
        "split": {
            "rule": split.rule,
            "tune_fraction": args.tune_fraction,
            "eval_documents_used": eval_docs,
            "tune_documents_used": tune_docs,
            "eval_blocks": split.eval.len(),
            "tune_blocks": split.tune.len(),
        },
    });
    let fingerprint = Fingerprint::new(
        &settings,
        sha256_files(&args.model.checkpoint_files(env.assets)?)?,
        sha256_documents(&raw_docs),
        env.code_version.clone(),
    );
    Ok(Prepared {
        text_path,
        split,
        tune_docs,
        model,
        inference,
        tint_config,
        config,
        settings,
        fingerprint,
    })
}

/// Writes the partial report of a run: the cells finished now (and the stored ones) and the
/// tuning records so far.
type WritePartial<'a> = dyn Fn(Vec<MethodResult>, &[TuneRecord]) -> Result<(), EvalError> + 'a;

/// What choosing the rows' step sizes reads and counts: the run's settings, the models, the
/// tuning blocks and fractions, the stored tunings of a resumed run, where progress and partial
/// reports go, and the progress units done (and added by grid extensions).
struct StepChooser<'a, 'e, AB: AutodiffBackend> {
    args: &'a LmRunSettings,
    model: &'a AuxModel<AB>,
    inference: &'a AuxModel<AB::InnerBackend>,
    tint_config: &'a TintConfig,
    /// Step sizes are tuned at one fraction, or at every evaluated one (`--tune-per-fraction`).
    tune_fractions: &'a [f64],
    tune_tokens: &'a [Vec<u32>],
    /// The tuning blocks' documents, as the records name them.
    tune_split: &'a str,
    /// The tunings of the report a resumed run reads.
    stored_tuning: &'a [TuneRecord],
    /// The reports of `--cells-from`, whose tunings of this run's inputs are taken.
    donors: &'a [LmDonor],
    write_partial: &'a WritePartial<'a>,
    on_event: OnEvent<'e>,
    /// Progress units planned at the start (tuning, then evaluation).
    fixed_units: usize,
    /// Units done so far.
    done: usize,
    /// Tuning units added by grid extensions.
    extra_units: usize,
    /// The records of every step given, shared or tuned, in the order chosen.
    tuning: Vec<TuneRecord>,
}

impl<AB: AutodiffBackend> StepChooser<'_, '_, AB> {
    /// The rows' plans: each row's step given, shared from another row's choice, reused from a
    /// resumed report's tuning, or tuned on the tuning blocks at each tuning fraction (a partial
    /// report written after each). Rows that share another row's choice go last, once it is known.
    fn plan_rows(&mut self, rows: Vec<PendingRow>) -> Result<Vec<RowPlan>, EvalError> {
        let (shared_rows, own_rows): (Vec<_>, Vec<_>) = rows
            .into_iter()
            .partition(|r| matches!(r.step, StepSource::Shared(_)));
        own_rows
            .into_iter()
            .chain(shared_rows)
            .map(|row| self.plan_row(row))
            .collect()
    }

    /// One row's plan (its step at each tuning fraction).
    fn plan_row(&mut self, row: PendingRow) -> Result<RowPlan, EvalError> {
        let spec = row.spec;
        // The step of each tuning fraction (`None`: the row's own step, nothing tuned).
        let mut chosen: Vec<(f64, f64)> = Vec::new();
        let mut tuned_parameter = "eta";
        match row.step {
            StepSource::None => {}
            StepSource::Shared(from) => {
                for &tf in self.tune_fractions {
                    let source = self
                        .tuning
                        .iter()
                        .find(|t| t.method == from && tuned_at(t, tf, self.args.tune_per_fraction))
                        .ok_or_else(|| EvalError::InvalidSetting {
                            name: "--tune-tint-via-ref",
                            value: format!("{} from {from}", spec.label),
                            rule: "the row whose step is shared must run".into(),
                        })?;
                    let mut record = source.clone();
                    record.method = spec.label.clone();
                    record.source = format!(
                        "the choice of `{from}` (same update; the executions are tested equal), \
                         which was tuned on {}",
                        source.source
                    );
                    chosen.push((tf, record.choice));
                    self.tuning.push(record);
                }
            }
            StepSource::Given(record) => self.tuning.push(record),
            StepSource::Tune { parameter, grid } => {
                for &tf in self.tune_fractions {
                    let digest = tuning_inputs_sha256(
                        &spec,
                        parameter,
                        &grid,
                        self.args.tune_extend,
                        self.tint_config,
                        tf,
                        self.args.block_size,
                        self.tune_tokens,
                    );
                    let reused = self.stored_tuning.iter().find(|t| {
                        t.tuned
                            && t.method == spec.label
                            && t.parameter == parameter
                            && t.given_grid() == grid
                            && tuned_at(t, tf, self.args.tune_per_fraction)
                    });
                    // A record whose numbers do not say its choice is tuned again.
                    let reused = reused.filter(|t| match t.check() {
                        Ok(()) => true,
                        Err(why) => {
                            (self.on_event)(RunEvent::Note(format!(
                                "{} f={tf}: stored tuning fails its check ({why}); tuned again",
                                spec.label
                            )));
                            false
                        }
                    });
                    let donated = match reused {
                        Some(_) => None,
                        None => donated_tuning(self.donors, &digest),
                    };
                    let record = match (reused, donated) {
                        (Some(r), _) => {
                            self.done += grid.len() * self.tune_tokens.len();
                            (self.on_event)(RunEvent::Note(format!(
                                "{} f={tf}: stored tuning reused",
                                spec.label
                            )));
                            r.clone()
                        }
                        (None, Some((path, r))) => {
                            self.done += grid.len() * self.tune_tokens.len();
                            (self.on_event)(RunEvent::Note(format!(
                                "{} f={tf}: tuning taken from --cells-from {}",
                                spec.label,
                                path.display()
                            )));
                            r.clone()
                        }
                        (None, None) => {
                            let (model, inference, tint_config) =
                                (self.model, self.inference, self.tint_config);
                            let fixed_units = self.fixed_units;
                            let (done, extra_units, on_event) =
                                (&mut self.done, &mut self.extra_units, &mut self.on_event);
                            let before = *done;
                            let planned = grid.len() * self.tune_tokens.len();
                            let extra_before = *extra_units;
                            // The last tuning block's gradient or direction, shared by the
                            // grid's values.
                            let reuse = TuningReuse::default();
                            let record = tune_lm(
                                &spec.label,
                                parameter,
                                &grid,
                                self.args.tune_extend,
                                self.tune_tokens,
                                tf,
                                self.tune_split,
                                shares_gradients(&spec),
                                &mut |value| {
                                    let mut s = spec.clone();
                                    if parameter == "lr" {
                                        s.lr = Some(value);
                                    } else {
                                        s.eta = value;
                                    }
                                    build_tuning_method(&s, model, inference, tint_config, &reuse)
                                },
                                &mut |d, t, message| {
                                    *done = before + d;
                                    *extra_units = extra_before + t.saturating_sub(planned);
                                    on_event(RunEvent::Progress {
                                        done: *done,
                                        total: fixed_units + *extra_units,
                                        message,
                                    });
                                },
                            )
                            .map_err(non_finite_hint(TUNING_HINT))?;
                            on_event(RunEvent::Note(record.summary()));
                            TuneRecord {
                                inputs_sha256: Some(digest),
                                ..record
                            }
                        }
                    };
                    chosen.push((tf, record.choice));
                    self.tuning.push(record);
                    (self.write_partial)(Vec::new(), &self.tuning)?;
                }
                tuned_parameter = parameter;
            }
        }
        Ok(RowPlan::new(
            spec,
            &self.args.train_fraction,
            &chosen,
            tuned_parameter,
            self.args.block_size,
        ))
    }
}

/// Writes the final report: the JSON, the markdown (tables and step sizes), and the perplexity and
/// paired-difference charts when every perplexity is finite. Returns the files written.
///
/// # Errors
///
/// Failed writes, and charts that cannot be drawn.
pub fn write_lm_outputs(
    report: &LmReport,
    out: &Path,
    title: &str,
    on_event: OnEvent<'_>,
) -> Result<Vec<PathBuf>, EvalError> {
    report.write_json(out)?;
    let table = report.markdown_table() + &report.paired_markdown();
    let md = out.with_extension("md");
    write_file(
        &md,
        format!(
            "{table}\nStep sizes:\n\n{}\nSettings: see {}\n",
            report.tuning_markdown(),
            out.display()
        )
        .as_bytes(),
    )?;
    let mut written = vec![out.to_path_buf(), md];
    let finite = report
        .results
        .iter()
        .all(|c| c.perplexity.value.is_finite());
    if !finite {
        on_event(RunEvent::Note(
            "charts not drawn: the report holds non-finite perplexities".into(),
        ));
        return Ok(written);
    }
    let svg = out.with_extension("svg");
    write_file(
        &svg,
        crate::lm_plot::perplexity_svg(report, title)?.as_bytes(),
    )?;
    written.push(svg);
    if report.paired.iter().any(|p| p.diff.baseline == "vanilla") {
        let paired_svg = paired_svg_path(out);
        write_file(
            &paired_svg,
            crate::lm_plot::difference_svg(report, "vanilla", title)?.as_bytes(),
        )?;
        written.push(paired_svg);
    }
    Ok(written)
}

/// The stored report at `out` when it was made with the same fingerprint (settings, checkpoint,
/// text, code). No file: nothing to resume.
///
/// # Errors
///
/// [`EvalError::Report`] for a file that is not a report, has no fingerprint, or was made with
/// another fingerprint (naming the parts that differ).
pub fn previous_report(
    out: &Path,
    fingerprint: &Fingerprint,
) -> Result<Option<LmReport>, EvalError> {
    if !out.exists() {
        return Ok(None);
    }
    let report_error = |reason: String| EvalError::Report {
        path: out.to_path_buf(),
        reason,
    };
    let previous = LmReport::read_json(out)?;
    let theirs: Fingerprint = serde_json::from_value(previous.settings["fingerprint"].clone())
        .map_err(|_| {
            report_error(
                "--resume: the report has no fingerprint (made by an older version); use another \
                 --out or drop --resume"
                    .into(),
            )
        })?;
    let differences = fingerprint.describe_differences(&theirs);
    if !differences.is_empty() {
        return Err(report_error(format!(
            "--resume: the report was made otherwise ({}); use another --out or drop --resume",
            differences.join("; ")
        )));
    }
    Ok(Some(previous))
}

/// The paragraph under an LM table: blocks, split, step sizes, methods, JSON.
pub fn lm_description(args: &LmRunSettings, report: &LmReport, json_name: &str) -> String {
    let split = &report.settings["run"]["split"];
    let layers = match args.budget.first().map(|b| b.layers) {
        Some(Some(l)) => format!("the top {l} of the model's layers"),
        Some(None) => "all layers".into(),
        None => match args.tint.sim_layer_count() {
            Ok(Some(l)) => format!("the top {l} of the model's layers"),
            _ => "all layers".into(),
        },
    };
    let has = |m: Method| args.methods.contains(&m);
    let baselines = if has(Method::DynEval) {
        "from `vanilla` and from `dyn-eval`"
    } else {
        "from `vanilla`"
    };
    let mut steps = Vec::new();
    let tint_rows: Vec<String> = [
        (
            Engine::CONSTRUCTED,
            "the constructed LLaMA simulator (Execution::Constructed)",
        ),
        (
            Engine::STRUCTURED,
            "the same simulator in its structured execution",
        ),
        (Engine::Reference, "the functional reference"),
    ]
    .into_iter()
    .filter(|(m, _)| has(Method::Tint(*m)))
    .map(|(m, what)| format!("`{}` is {what}", tint_method_name(m)))
    .collect();
    if !tint_rows.is_empty() {
        steps.push(format!(
            "{}, updating {layers} with eta on the SUMMED loss",
            tint_rows.join(", ")
        ));
    }
    if has(Method::DynEval) {
        steps.push(
            "`dyn-eval` is plain SGD on the MEAN loss of all parameters with the matched lr = eta \
             x (train tokens - 1)"
                .into(),
        );
    }
    if has(Method::DynEvalMatched) {
        steps.push(format!(
            "`dyn-eval-matched` is the same SGD restricted to exactly the parameters TinT updates \
             (W_V, W_O and the MLP of {layers}, for the same steps; the matched baseline)"
        ));
    }
    if args.vanilla_from_ref {
        steps.push(
            "`vanilla` is read from `tint-ref`'s first pass on each block (`--vanilla-from-ref`)"
                .into(),
        );
    }
    format!(
        "Model: {}. Perplexity of the evaluated part of {} blocks of {} tokens (95 % bootstrap intervals over \
         blocks), and the paired difference of every method {baselines} per \
         block (mean NLL per evaluated token; 95 % paired bootstrap interval; wins = blocks where \
         the method is lower). Evaluation and tuning blocks come from disjoint documents: {}; \
         evaluation blocks from {} documents, tuning blocks from {}. One step on the training part: \
         {}. Step sizes:\n\n{}\n\
         JSON with every setting, the split, the tuning grid and per-block losses: \
         `docs/data/{json_name}`.",
        args.model.identity(),
        report.settings["blocks"],
        args.block_size,
        split["rule"].as_str().unwrap_or("?"),
        split["eval_documents_used"]
            .as_array()
            .map_or(0, Vec::len),
        list_names(&split["tune_documents_used"]),
        steps.join("; "),
        report.tuning_markdown(),
    )
}

/// Names of a JSON array of strings, `a, b, c`.
fn list_names(value: &serde_json::Value) -> String {
    let names: Vec<&str> = value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "none (nothing tuned)".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_with_another_fingerprint_is_refused() {
        let dir = std::env::temp_dir().join(format!("tint-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("lm.json");
        let fp = Fingerprint::new(
            &serde_json::json!({"args": {"max_blocks": 8}}),
            "a",
            "t",
            "v",
        );
        assert!(previous_report(&out, &fp).unwrap().is_none());
        LmReport {
            settings: serde_json::json!({ "fingerprint": fp }),
            results: vec![],
            paired: vec![],
            tuning: vec![],
        }
        .write_json(&out)
        .unwrap();
        assert!(previous_report(&out, &fp).unwrap().is_some());
        let mut other = fp.clone();
        other.checkpoint_sha256 = "b".into();
        let err = previous_report(&out, &other).unwrap_err().to_string();
        assert!(
            err.contains("checkpoint SHA-256 a… in the report, b… now") && err.contains("lm.json"),
            "{err}"
        );
        // A changed setting is named by its key with both values.
        let steps = Fingerprint::new(
            &serde_json::json!({"args": {"max_blocks": 16}}),
            "a",
            "t",
            "v",
        );
        let err = previous_report(&out, &steps).unwrap_err().to_string();
        assert!(
            err.contains("setting args.max_blocks: 8 in the report, 16 in this run"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The functional reference's step on LLaMA models is admitted by its estimate times the
    /// blocks scored at once (`tint_sim::llama::ReferenceStepMemory`); a run without it, or
    /// under the limit, is admitted.
    #[test]
    fn a_tint_reference_step_over_the_limit_is_refused_for_the_blocks_at_once() {
        use burn::backend::Flex;
        use tint_sim::llama::{LlamaReference, LlamaTintConfig};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let model: AuxModel<Flex> =
            tint_aux::load_model(&root.join("fixtures/llama/tiny"), &Default::default()).unwrap();
        let mut args = LmRunSettings::quick(&root, &root.join("target"));
        args.methods = vec![Method::Vanilla, Method::Tint(Engine::Reference)];
        args.block_size = 16;
        let config = args.tint.config(&model, 0.0, args.steps).unwrap();
        let one = LlamaReference::new(&model, LlamaTintConfig::from_tint(&config))
            .unwrap()
            .step_memory(&[16])
            .total();
        let message = admit_step_memory(&args, &model, &config, 2, 2 * one - 1)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("tint-ref's step on 2 block(s) of 16 tokens at a time")
                && message.contains("--max-memory-gib (or fewer --workers)"),
            "{message}"
        );
        admit_step_memory(&args, &model, &config, 2, 2 * one).unwrap();
        args.methods = vec![Method::Vanilla];
        admit_step_memory(&args, &model, &config, 2, 0).unwrap();
    }

    #[test]
    fn free_units_are_left_out_of_the_progress() {
        // Two fractions of (tint-ref, vanilla) × 3 blocks; vanilla's 3 blocks are free.
        let units = EvalUnits {
            per_fraction: 6,
            free_per_fraction: 3,
        };
        let counted: Vec<usize> = (0..=12).map(|d| units.counted(d)).collect();
        assert_eq!(counted, [0, 1, 2, 3, 3, 3, 3, 4, 5, 6, 6, 6, 6]);
        let none_free = EvalUnits {
            per_fraction: 6,
            free_per_fraction: 0,
        };
        assert_eq!(none_free.counted(11), 11);
    }

    #[test]
    fn hints_go_in_front_of_non_finite_errors_only() {
        let non_finite = EvalError::NonFinite {
            method: "vanilla".into(),
            quantity: "NLL",
            location: "block 0".into(),
            value: f64::NAN,
            origin: crate::non_finite::NonFiniteOrigin::Forward,
        };
        let hinted = non_finite_hint::<EvalError>(RECORD_HINT)(non_finite);
        assert_eq!(hinted.to_string(), RECORD_HINT);
        assert!(hinted.is_non_finite());
        let other = EvalError::Plot(tint_lab::chart::ChartError("x".into()));
        assert_eq!(
            non_finite_hint::<EvalError>(RECORD_HINT)(other).to_string(),
            "cannot draw the chart: x"
        );
    }

    #[test]
    fn the_paired_chart_sits_next_to_the_report() {
        assert_eq!(
            paired_svg_path(Path::new("r/lm.json")),
            PathBuf::from("r/lm-paired.svg")
        );
    }
}
