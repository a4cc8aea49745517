//! A whole in-context classification run (`cargo xtask eval icl`; paper Table 1, appendix L):
//! tasks × methods × shots × formats × losses, seeds per cell, with and without calibration, step
//! sizes tuned on dev examples carved from the demonstration pool. Writes `OUT.json` (every
//! setting, seed and prediction; `resume` skips its finished cells), `OUT.md` (the paper's layout)
//! and `OUT-accuracy.svg` / `OUT-accuracy-calibrated.svg`, atomically after every cell.

use std::path::{Path, PathBuf};

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use sha2::{Digest, Sha256};
use tint_aux::{AuxModel, DynEvalConfig, ParamSelection, SgdGradient};
use tint_sim::{Engine, StepDirection, TintConfig};

use super::cell_digest::{cell_inputs_sha256, tuning_inputs_sha256};
use super::cell_donors::{read_cell_donors, CellDonor};
use super::loaders::{load_offline_task, load_task_dir};
use super::merge::fingerprint_differences;
use super::run_settings::IclRunSettings;
use super::{
    accuracy_bars_svg, calibration_prior, cell_key, run_icl_cell, tune_icl, CellKey, DemoFormat,
    DynEvalIcl, IclMethod, IclReport, IclSettings, PerSeedStep, PlainIcl, PromptEncoder, StepReuse,
    TaskData, TaskKind, Template, TintIcl, TrainLoss,
};
use crate::documents::sha256_files;
use crate::lm_run::{non_finite_hint, RECORD_HINT, TUNING_HINT};
use crate::method::Method;
use crate::methods::{tint_method_name, Tint};
use crate::model_source::Assets;
use crate::results_doc::write_file;
use crate::run_env::RunEnv;
use crate::run_settings::{
    check_out_extension, check_step_count, check_steps, parse_layers, refuse_repeats,
    refuse_repeats_shown,
};
use crate::tune_record::TuneRecord;
use crate::EvalError;
use tint_lab::event::{OnEvent, RunEvent};
use tint_lab::paired::PairedSettings;

/// Parses a training format: `single` or `multi`.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming `--formats` and the text.
pub fn parse_format(name: &str) -> Result<DemoFormat, EvalError> {
    match name {
        "single" => Ok(DemoFormat::Single),
        "multi" => Ok(DemoFormat::Multi),
        _ => Err(EvalError::InvalidSetting {
            name: "--formats",
            value: name.into(),
            rule: "expected single or multi".into(),
        }),
    }
}

/// Parses a training loss: `label` (`label-only`) or `full-context` (`full`).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming `--losses` and the text.
pub fn parse_loss(name: &str) -> Result<TrainLoss, EvalError> {
    match name {
        "label" | "label-only" => Ok(TrainLoss::LabelOnly),
        "full" | "full-context" => Ok(TrainLoss::FullContext),
        _ => Err(EvalError::InvalidSetting {
            name: "--losses",
            value: name.into(),
            rule: "expected label or full-context".into(),
        }),
    }
}

/// The offline tasks and the asset (and the file in it) that holds each.
fn offline_asset(task: TaskKind) -> Option<(&'static str, Option<&'static str>)> {
    match task {
        TaskKind::MrSnippets => Some((
            "sentiment-snippets",
            Some("movieReviewSnippets_GroundTruth.txt"),
        )),
        TaskKind::CrSnippets => Some((
            "sentiment-snippets",
            Some("amazonReviewSnippets_GroundTruth.txt"),
        )),
        TaskKind::BbcTopics => Some(("bbc-topics", None)),
        TaskKind::AmazonFineFood => Some(("amazon-fine-food", None)),
        _ => None,
    }
}

/// Loads a task from `data` or, for the offline tasks, from their asset.
fn load_task(
    task: TaskKind,
    data: Option<&Path>,
    args: &IclRunSettings,
    assets: &dyn Assets,
) -> Result<TaskData, EvalError> {
    let offline = offline_asset(task);
    let path = match (data, offline) {
        (Some(path), _) => path.to_path_buf(),
        (None, Some((asset, file))) => {
            let dir = assets.asset(asset)?;
            file.map_or(dir.clone(), |f| dir.join(f))
        }
        (None, None) => {
            return Err(EvalError::InvalidSetting {
                name: "--data",
                value: format!("none for task {task}"),
                rule: "a standard task needs its directory or file".into(),
            })
        }
    };
    let mut data = if offline.is_some() {
        load_offline_task(
            task,
            &path,
            args.n_test,
            args.split_seed,
            args.balanced_test,
        )?
    } else {
        let mut data = load_task_dir(task, &path)?;
        if args.balanced_test {
            data.subsample_test_balanced(args.n_test, args.split_seed)?;
        }
        data
    };
    if !args.balanced_test {
        data.subsample_test(args.n_test, args.split_seed);
    }
    Ok(data)
}

/// Where a method's step size comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Given in the settings.
    Given(f64),
    /// Tuned on the dev set over this grid.
    Tune(Vec<f64>),
}

/// One method row (before tuning).
#[derive(Debug, Clone, PartialEq)]
pub struct MethodSpec {
    /// The method.
    pub method: Method,
    /// Its step (`None` for plain ICL).
    pub step: Option<Step>,
}

impl MethodSpec {
    /// The row's method name (`icl` for the plain model).
    pub fn name(&self) -> &'static str {
        self.method.icl_name()
    }

    /// The tuned parameter: `lr` for dynamic evaluation, `eta` otherwise.
    pub fn parameter(&self) -> &'static str {
        if self.method.is_dyn_eval() {
            "lr"
        } else {
            "eta"
        }
    }
}

/// The method rows of `args`: one per method, one per given dynamic-evaluation lr.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] for negative or non-finite step sizes.
pub fn method_specs(args: &IclRunSettings) -> Result<Vec<MethodSpec>, EvalError> {
    let mut specs = Vec::new();
    for &method in &args.methods {
        let spec = |step| MethodSpec { method, step };
        match method {
            Method::Vanilla => specs.push(spec(None)),
            Method::DynEval | Method::DynEvalMatched => match &args.lr {
                Some(lrs) => {
                    check_steps("--lr", lrs)?;
                    specs.extend(lrs.iter().map(|&lr| spec(Some(Step::Given(lr)))))
                }
                None => specs.push(spec(Some(Step::Tune(args.grid("lr"))))),
            },
            Method::Tint(_) => {
                let step = match args.inner_lr {
                    Some(eta) => {
                        check_steps("--inner-lr", &[eta])?;
                        Step::Given(eta)
                    }
                    None => Step::Tune(args.grid("eta")),
                };
                specs.push(spec(Some(step)));
            }
        }
    }
    Ok(specs)
}

/// Rebuilds the markdown, the SVG charts and the paired differences of the report at `out` from
/// its cells (`--render-only`), leaving every cell as it is.
pub fn render_icl_report(out: &Path) -> Result<IclReport, EvalError> {
    let mut report = IclReport::read_json(out)?;
    report.compute_paired(&PairedSettings::default());
    write_outputs(&report, out)?;
    Ok(report)
}

/// Writes the report: JSON, markdown and the two accuracy charts.
///
/// # Errors
///
/// Failed writes and chart errors.
pub fn write_outputs(report: &IclReport, out: &Path) -> Result<(), EvalError> {
    report.write_json(out)?;
    write_file(&out.with_extension("md"), report.markdown().as_bytes())?;
    // Before the first cell (tuning records only) there is nothing to chart yet.
    if report.cells.is_empty() {
        return Ok(());
    }
    for (calibrated, suffix) in [(false, "accuracy"), (true, "accuracy-calibrated")] {
        write_file(
            &accuracy_svg_path(out, suffix),
            accuracy_bars_svg(report, calibrated)?.as_bytes(),
        )?;
    }
    Ok(())
}

/// `OUT-{suffix}.svg` next to `OUT.json` (`accuracy`, `accuracy-calibrated`).
pub fn accuracy_svg_path(out: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}-{suffix}.svg", out.with_extension("").display()))
}

/// The requested formats `method` trains in. A format it cannot train in is skipped with a note;
/// if that leaves none (TinT asked for the default `single`), the formats it supports are used
/// instead, so `tint` alone still runs its k-shot cells.
pub fn training_formats(
    method: &dyn IclMethod,
    requested: &[DemoFormat],
    note: &mut dyn FnMut(String),
) -> Vec<DemoFormat> {
    let supported: Vec<DemoFormat> = requested
        .iter()
        .copied()
        .filter(|&f| method.supports(f))
        .collect();
    for format in requested.iter().filter(|&&f| !method.supports(f)) {
        note(format!(
            "{} does not train in the {} format: skipped",
            method.name(),
            format.name()
        ));
    }
    if !supported.is_empty() {
        return supported;
    }
    let fallback: Vec<DemoFormat> = [DemoFormat::Single, DemoFormat::Multi]
        .into_iter()
        .filter(|&f| method.supports(f))
        .collect();
    let names: Vec<&str> = fallback.iter().map(|f| f.name()).collect();
    note(format!(
        "{}: none of the requested formats applies; using {}",
        method.name(),
        names.join(", ")
    ));
    fallback
}

/// The (format, loss) variants a method runs at `k` shots.
fn variants(
    method: &dyn IclMethod,
    k: usize,
    formats: &[DemoFormat],
    losses: &[TrainLoss],
    note: &mut dyn FnMut(String),
) -> Vec<(DemoFormat, TrainLoss)> {
    // Formats and losses matter only when the method trains on demonstrations.
    if method.trains() && k > 0 {
        training_formats(method, formats, note)
            .into_iter()
            .flat_map(|f| losses.iter().map(move |&l| (f, l)))
            .collect()
    } else {
        vec![(DemoFormat::Single, TrainLoss::LabelOnly)]
    }
}

/// Refuses methods whose rows (`row_names`, one per spec) share a name: cells are keyed by the row
/// name, so the later cell would replace the other.
fn refuse_shared_row_names(specs: &[MethodSpec], row_names: &[String]) -> Result<(), EvalError> {
    for (i, name) in row_names.iter().enumerate() {
        if row_names[..i].contains(name) {
            return Err(EvalError::InvalidSetting {
                name: "--methods",
                value: specs.iter().map(|s| s.name()).collect::<Vec<_>>().join(","),
                rule: "two methods give the same row name (their cells would overwrite each other)"
                    .into(),
            });
        }
    }
    Ok(())
}

/// The step a method is probed at (its formats, its label): the given step, the grid's first
/// value, or 0 for a method without one.
fn probe_value(spec: &MethodSpec) -> f64 {
    match &spec.step {
        None => 0.0,
        Some(Step::Given(v)) => *v,
        Some(Step::Tune(grid)) => grid[0],
    }
}

/// SHA-256 of a task's examples (pool and test, texts and labels), for the resume fingerprint.
fn sha256_task(data: &TaskData) -> String {
    let mut hasher = Sha256::new();
    for e in data.train.iter().chain(&data.test) {
        hasher.update((e.text.len() as u64).to_le_bytes());
        hasher.update(e.text.as_bytes());
        hasher.update((e.label as u64).to_le_bytes());
    }
    format!("{:x}", hasher.finalize())
}

/// The models a run's methods are built from.
struct Models<'a, AB: AutodiffBackend> {
    model: &'a AuxModel<AB>,
    inference: &'a AuxModel<AB::InnerBackend>,
    device: &'a AB::Device,
    /// Dynamic evaluation's last one-step gradients, shared across a grid's learning rates and
    /// with the cells that train on the same demonstrations.
    dyn_eval_steps: StepReuse<SgdGradient<AB>>,
    /// TinT's last descent directions, shared likewise.
    tint_steps: StepReuse<dyn StepDirection<AB::InnerBackend>>,
    /// Bytes a training step may need by its estimate ([`RunEnv::memory_limit`]).
    memory_limit: u64,
}

impl<'a, AB: AutodiffBackend> Models<'a, AB> {
    fn new(
        model: &'a AuxModel<AB>,
        inference: &'a AuxModel<AB::InnerBackend>,
        device: &'a AB::Device,
        memory_limit: u64,
        kept_steps: usize,
    ) -> Self {
        Self {
            model,
            inference,
            device,
            dyn_eval_steps: StepReuse::with_capacity(kept_steps),
            tint_steps: StepReuse::with_capacity(kept_steps),
            memory_limit,
        }
    }
}

/// Builds the method of `spec` with step `value` (ignored for `icl`); returns it and its settings
/// string.
fn build_method<'a, AB: AutodiffBackend>(
    spec: &MethodSpec,
    value: f64,
    args: &IclRunSettings,
    models: &Models<'a, AB>,
) -> Result<(Box<dyn IclMethod + 'a>, String), EvalError> {
    Ok(match spec.method {
        Method::Vanilla => (Box::new(PlainIcl::new(models.inference)), String::new()),
        Method::DynEval | Method::DynEvalMatched => {
            let params = if spec.method == Method::DynEvalMatched {
                // Exactly what TinT updates: its parameter groups in its simulated layers.
                crate::methods::tint_updated_params(models.model, args.tint.sim_layer_count()?)
            } else {
                match parse_layers("--train-layers", &args.train_layers)? {
                    None => ParamSelection::all(),
                    Some(n) => ParamSelection::top_layers(n),
                }
            };
            let config = DynEvalConfig {
                lr: value,
                steps: args.steps,
                params,
                ..Default::default()
            };
            let settings = format!("{config:?}");
            let method = DynEvalIcl::new(models.model, config)
                .named(spec.method.name())
                .with_step_reuse(models.dyn_eval_steps.clone())
                .with_kept_beside(models.tint_steps.held())
                .with_memory_limit(models.memory_limit);
            (Box::new(method), settings)
        }
        Method::Tint(method) => {
            let mut config = args.tint.config(models.inference, value, args.steps)?;
            // The recorded settings name the execution that runs (the engine sets it).
            if let Some(execution) = method.execution() {
                config.execution = execution;
            }
            let settings = tint_settings(&config, method);
            // The same settings with the step size left out: what a descent direction depends on.
            let mut unscaled = config.clone();
            unscaled.step.inner_lr = 0.0;
            let direction_settings = tint_settings(&unscaled, method);
            let tint = Tint::for_method(models.inference, config, method)?;
            let label = format!(
                "{}(eta={value:e},steps={})",
                tint_method_name(method),
                args.steps
            );
            let icl = TintIcl::new(tint, label, models.device)
                .with_step_reuse(models.tint_steps.clone(), direction_settings)
                .with_kept_beside(models.dyn_eval_steps.held())
                .with_memory_limit(models.memory_limit);
            (Box::new(icl), settings)
        }
    })
}

/// The recorded settings of a TinT row: the configuration and the method, and for the functional
/// reference (`tint-ref`, no constructed network) a statement that the configuration's `execution`
/// field does not apply, so the record does not read as a constructed run.
fn tint_settings(config: &TintConfig, method: Engine) -> String {
    match method.execution() {
        Some(_) => format!("{config:?} {}", tint_method_name(method)),
        None => format!(
            "{config:?} {}: the functional reference of the step, no constructed network (the \
             execution field does not apply)",
            tint_method_name(method)
        ),
    }
}

/// The method of `spec` once per seed of `args.seeds` with that seed's step (`values`, in the
/// order of the seeds), as one [`PerSeedStep`] row named after the method with `per-seed` in
/// place of the step (`dyn-eval(lr=per-seed,steps=1)`); its settings list every seed's.
fn build_per_seed<'a, AB: AutodiffBackend>(
    spec: &MethodSpec,
    values: &[f64],
    args: &IclRunSettings,
    models: &Models<'a, AB>,
) -> Result<(Box<dyn IclMethod + 'a>, String), EvalError> {
    let mut methods = Vec::with_capacity(values.len());
    let mut settings = Vec::with_capacity(values.len());
    let mut name = String::new();
    for (&seed, &value) in args.seeds.iter().zip(values) {
        let (method, method_settings) = build_method(spec, value, args, models)?;
        if name.is_empty() {
            name = method.name().replace(&format!("{value:e}"), "per-seed");
        }
        settings.push(format!("seed {seed}: {method_settings}"));
        methods.push((seed, method));
    }
    let row = PerSeedStep::new(name, methods)?;
    Ok((Box::new(row), settings.join("; ")))
}

/// The parsed settings of a run.
#[derive(Debug)]
struct Checked {
    tasks: Vec<TaskKind>,
    formats: Vec<DemoFormat>,
    losses: Vec<TrainLoss>,
    specs: Vec<MethodSpec>,
}

/// Checks the settings before anything is read: the output path, tasks, data paths, calibration,
/// formats, losses and step sizes.
fn check(args: &IclRunSettings) -> Result<Checked, EvalError> {
    check_out_extension(&args.out, "json")?;
    let tasks: Vec<TaskKind> = args
        .task
        .iter()
        .map(|t| TaskKind::parse(t))
        .collect::<Result<_, _>>()?;
    if !args.data.is_empty() && args.data.len() != tasks.len() {
        return Err(EvalError::InvalidSetting {
            name: "--data",
            value: format!("{} paths for {} tasks", args.data.len(), tasks.len()),
            rule: "one path per task".into(),
        });
    }
    refuse_repeats("--task", &tasks)?;
    refuse_repeats_shown("--methods", &args.methods, |m| m.icl_name().to_string())?;
    refuse_repeats("--shots", &args.shots)?;
    refuse_repeats("--seeds", &args.seeds)?;
    refuse_repeats("--formats", &args.formats)?;
    refuse_repeats("--losses", &args.losses)?;
    check_step_count(args.steps)?;
    if args.n_test == 0 {
        return Err(EvalError::InvalidSetting {
            name: "--n-test",
            value: "0".into(),
            rule: "evaluate at least one example".into(),
        });
    }
    if args.calibration != "prompt" && args.calibration != "demos" {
        return Err(EvalError::InvalidSetting {
            name: "--calibration",
            value: args.calibration.clone(),
            rule: "expected prompt (the paper's) or demos".into(),
        });
    }
    let formats = args
        .formats
        .iter()
        .map(|f| parse_format(f))
        .collect::<Result<_, _>>()?;
    let losses = args
        .losses
        .iter()
        .map(|l| parse_loss(l))
        .collect::<Result<_, _>>()?;
    Ok(Checked {
        tasks,
        formats,
        losses,
        specs: method_specs(args)?,
    })
}

/// Runs an in-context classification run and returns the report it wrote; `on_event` receives the
/// progress (dev examples per grid value, then test examples per cell and seed) and notes.
///
/// # Errors
///
/// Invalid settings (before anything is read), assets, checkpoints or data that cannot be read, a
/// stored report that does not belong to this run (`resume`), non-finite values (with
/// [`RECORD_HINT`] or [`TUNING_HINT`] in front) and failed writes.
pub fn run_icl<AB: AutodiffBackend>(
    args: &IclRunSettings,
    env: &RunEnv<'_, AB>,
    on_event: OnEvent<'_>,
) -> Result<IclReport, EvalError> {
    if args.render_only {
        return render_icl_report(&args.out);
    }
    let Checked {
        tasks,
        formats,
        losses,
        specs,
    } = check(args)?;
    // Also creates the output's directory.
    let _lock = crate::output_lock::OutputLock::acquire(&args.out)?;
    let tokenizer = args.model.tokenizer(env.assets)?;
    let model: AuxModel<AB> = args.model.load(env.assets, &env.device)?;
    let inference = model.valid();

    // Load every task first: the fingerprint covers their examples.
    let loaded = load_tasks(&tasks, args, env)?;
    let mut report = resumable_report(args, env, &loaded)?;
    let stored_tuning = std::mem::take(&mut report.tuning);
    let donors = read_cell_donors(&args.cells_from, &args.out, &report, &mut |n| {
        on_event(RunEvent::Note(n))
    })?;

    let k_max = args.shots.iter().copied().max().unwrap_or(0);
    // The demonstration seeds a step is tuned on: the first seed's draw, or each seed's.
    let tune_seed_sets: Vec<Vec<u64>> = if args.tune_per_seed {
        args.seeds.iter().map(|&s| vec![s]).collect()
    } else {
        vec![vec![args.seeds.first().copied().unwrap_or(0)]]
    };
    // A step tuned for a seed's demonstrations at the largest k is kept until that seed's cell
    // trains on the same demonstrations (`TaskData::carve_dev` leaves one pool to both): one
    // gradient per tuned seed set.
    let models = Models::new(
        &model,
        &inference,
        &env.device,
        env.memory_limit,
        tune_seed_sets.len(),
    );
    // The formats and losses each method trains in at the largest k (a probe built at its first
    // step answers): each gets its own step (a summed loss over a full context wants a smaller
    // step than over the label words alone); a cell without training uses the first's.
    let mut spec_variants = Vec::with_capacity(specs.len());
    let mut row_names: Vec<String> = Vec::with_capacity(specs.len());
    for spec in &specs {
        let probe = build_method(spec, probe_value(spec), args, &models)?.0;
        row_names.push(probe.name());
        spec_variants.push(variants(
            probe.as_ref(),
            k_max,
            &formats,
            &losses,
            &mut |n| on_event(RunEvent::Note(n)),
        ));
    }
    refuse_shared_row_names(&specs, &row_names)?;
    let total = count_units(
        args,
        &loaded,
        &specs,
        &spec_variants,
        k_max,
        tune_seed_sets.len(),
    );
    let mut state = RunState {
        report,
        done: 0,
        total,
        on_event,
    };
    for (task, eval, dev) in &loaded {
        let template = Template::for_task(*task);
        let encoder = PromptEncoder::new(
            &tokenizer,
            &template,
            args.max_input_tokens,
            inference.max_positions(),
        )?;
        let prior = if args.calibration == "prompt" {
            Some(
                calibration_prior(
                    &mut PlainIcl::new(&inference),
                    &encoder,
                    args.allow_non_finite,
                )
                .map_err(non_finite_hint(RECORD_HINT))?,
            )
        } else {
            None
        };
        let run = TaskRun {
            args,
            models: &models,
            task: *task,
            eval,
            dev,
            encoder: &encoder,
            prior,
            k_max,
            tune_seed_sets: &tune_seed_sets,
            stored_tuning: &stored_tuning,
            donors: &donors,
        };
        for (spec, trained_variants) in specs.iter().zip(&spec_variants) {
            let label = format!("{} on {task}", spec.name());
            if let Some(Step::Given(v)) = &spec.step {
                let flag = if spec.parameter() == "lr" {
                    "--lr"
                } else {
                    "--inner-lr"
                };
                state
                    .report
                    .tuning
                    .push(TuneRecord::given(&label, spec.parameter(), *v, flag));
            }
            // Each variant's tuning, then its trained cells, so the cells find the tuning's
            // gradients still kept; the zero-shot cell (which trains on each query) last. The
            // report lists the cells in the order of `--shots` and the variants.
            let mut steps = Vec::with_capacity(trained_variants.len());
            let mut cells = Vec::new();
            for variant in trained_variants {
                let one = std::slice::from_ref(variant);
                steps.extend(run.variant_steps(spec, &label, trained_variants, one, &mut state)?);
                cells.extend(run.run_cells(spec, one, &steps, Shots::Trained, &mut state)?);
            }
            cells.extend(run.run_cells(spec, trained_variants, &steps, Shots::Zero, &mut state)?);
            cells.sort_by_key(|(order, _)| *order);
            let keys: Vec<CellKey> = cells.into_iter().map(|(_, key)| key).collect();
            state.report.order_cells(&keys);
            write_outputs(&state.report, &args.out)?;
        }
    }
    let mut report = state.report;
    // Tuning records of methods not run this time are kept, as their cells are.
    for t in stored_tuning {
        if !report.tuning.iter().any(|r| r.method == t.method) {
            report.tuning.push(t);
        }
    }
    report.compute_paired(&PairedSettings::default());
    write_outputs(&report, &args.out)?;
    Ok(report)
}

/// Which cells of a method [`TaskRun::run_cells`] runs: those with demonstrations (k > 0) or the
/// zero-shot one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shots {
    Trained,
    Zero,
}

/// A cell's place in the report: the position of its k in `--shots`, then of its variant.
type CellOrder = (usize, usize);

/// A loaded task: its kind, its evaluation set and the dev set carved from its pool.
type LoadedTask = (TaskKind, TaskData, TaskData);

/// Loads every task of the run and carves its dev set.
fn load_tasks<AB: AutodiffBackend>(
    tasks: &[TaskKind],
    args: &IclRunSettings,
    env: &RunEnv<'_, AB>,
) -> Result<Vec<LoadedTask>, EvalError> {
    let mut loaded = Vec::new();
    for (t, &task) in tasks.iter().enumerate() {
        let data = load_task(
            task,
            args.data.get(t).map(PathBuf::as_path),
            args,
            env.assets,
        )
        .map_err(|e| e.context(format!("loading task {task}")))?;
        let (eval, dev) = data
            .carve_dev(args.n_dev, args.split_seed)
            .map_err(|e| e.context(format!("carving the dev set of {task}")))?;
        loaded.push((task, eval, dev));
    }
    Ok(loaded)
}

/// The report this run writes: with `--resume`, the one at `--out` when its fingerprint (settings,
/// checkpoint, the tasks' examples, code version) is this run's (else an error naming what
/// differs); otherwise a new one. Its fingerprint is set.
fn resumable_report<AB: AutodiffBackend>(
    args: &IclRunSettings,
    env: &RunEnv<'_, AB>,
    loaded: &[LoadedTask],
) -> Result<IclReport, EvalError> {
    let fingerprint = serde_json::json!({
        "settings": args.fingerprint_text(),
        "checkpoint_sha256": sha256_files(&args.model.checkpoint_files(env.assets)?)?,
        "data_sha256": loaded.iter().map(|(t, e, _)| format!("{t}: {}", sha256_task(e))).collect::<Vec<_>>(),
        "code_version": env.code_version,
    });
    let mut report = if args.resume && args.out.is_file() {
        let report = IclReport::read_json(&args.out)?;
        if report.fingerprint.as_ref() != Some(&fingerprint) {
            let differences = fingerprint_differences(report.fingerprint.as_ref(), &fingerprint);
            return Err(EvalError::Report {
                path: args.out.clone(),
                reason: format!(
                    "--resume: the report was made with other settings: {} (in the report → in \
                     this run); use another --out or drop --resume",
                    if differences.is_empty() {
                        "its fingerprint differs".to_string()
                    } else {
                        differences.join(", ")
                    }
                ),
            });
        }
        report
    } else {
        IclReport::new(args.model.identity(), env.backend)
    };
    report.fingerprint = Some(fingerprint);
    Ok(report)
}

/// The progress units of a run, for its ETA: the dev examples of every tuned grid value, then
/// the evaluation examples of every cell and seed (grid extensions add theirs as they happen).
fn count_units(
    args: &IclRunSettings,
    loaded: &[LoadedTask],
    specs: &[MethodSpec],
    spec_variants: &[Vec<(DemoFormat, TrainLoss)>],
    k_max: usize,
    n_tune_seed_sets: usize,
) -> usize {
    let mut total = 0usize;
    for (_, eval, dev) in loaded {
        for (spec, trained) in specs.iter().zip(spec_variants) {
            let variants_at = |k: usize| if k == 0 { 1 } else { trained.len() };
            if let Some(Step::Tune(grid)) = &spec.step {
                total += variants_at(k_max) * n_tune_seed_sets * grid.len() * dev.test.len();
            }
            for &k in &args.shots {
                let seeds = if k == 0 { 1 } else { args.seeds.len() };
                total += variants_at(k) * seeds * eval.test.len();
            }
        }
    }
    total
}

/// A variant (format, loss) and its step: one for every seed, or one for each.
type VariantSteps = ((DemoFormat, TrainLoss), Vec<f64>);

/// A run's report and progress, which every tuning and cell writes to.
struct RunState<'e> {
    report: IclReport,
    /// Progress units done so far.
    done: usize,
    /// Progress units in all (grid extensions add theirs).
    total: usize,
    on_event: OnEvent<'e>,
}

/// One task's part of a run: its data, prompt encoder and calibration prior, and what every
/// method's rows share (the settings, the models, the tuning seeds, the stored tunings).
struct TaskRun<'r, AB: AutodiffBackend> {
    args: &'r IclRunSettings,
    models: &'r Models<'r, AB>,
    task: TaskKind,
    eval: &'r TaskData,
    dev: &'r TaskData,
    encoder: &'r PromptEncoder<'r>,
    /// The calibration prior of `--calibration prompt` (else each cell's own).
    prior: Option<Vec<f64>>,
    /// The largest k, at which steps are tuned.
    k_max: usize,
    tune_seed_sets: &'r [Vec<u64>],
    stored_tuning: &'r [TuneRecord],
    /// Reports whose matching cells are taken instead of computed (`--cells-from`).
    donors: &'r [CellDonor],
}

impl<AB: AutodiffBackend> TaskRun<'_, AB> {
    /// The step of each variant (format, loss) of `tuned` (some of the method's
    /// `trained_variants`): its given or probe value, or tuned on the dev set at the largest k
    /// (reused from a resumed report's records when they check), once for every seed or
    /// (`--tune-per-seed`) once for each.
    fn variant_steps(
        &self,
        spec: &MethodSpec,
        label: &str,
        trained_variants: &[(DemoFormat, TrainLoss)],
        tuned: &[(DemoFormat, TrainLoss)],
        state: &mut RunState<'_>,
    ) -> Result<Vec<VariantSteps>, EvalError> {
        let probe_value = probe_value(spec);
        // Per variant: one value for every seed, or (`--tune-per-seed`) one for each seed.
        let mut steps: Vec<VariantSteps> = Vec::new();
        for &(format, loss) in tuned {
            let Some(Step::Tune(grid)) = &spec.step else {
                steps.push(((format, loss), vec![probe_value]));
                continue;
            };
            let variant = if trained_variants.len() > 1 {
                format!(" [{}, {}]", format.name(), loss.name())
            } else {
                String::new()
            };
            let mut values = Vec::with_capacity(self.tune_seed_sets.len());
            for seeds in self.tune_seed_sets {
                let label = if self.args.tune_per_seed {
                    format!("{label}{variant}, seed {}", seeds[0])
                } else {
                    format!("{label}{variant}")
                };
                let settings = IclSettings {
                    k: self.k_max,
                    seeds: seeds.clone(),
                    format,
                    loss,
                    balanced: self.args.balanced,
                    demos_in_context: None,
                    method_settings: String::new(),
                    prior: self.prior.clone(),
                    // Tuning treats a diverging value as a grid outcome.
                    allow_non_finite: false,
                };
                let digest = tuning_inputs_sha256(
                    self.dev,
                    self.encoder,
                    &settings,
                    &format!(
                        "{:?} {} grid {grid:?}, extensions {}, steps {}, train layers {}, {:?}",
                        spec.method,
                        spec.parameter(),
                        self.args.tune_extend,
                        self.args.steps,
                        self.args.train_layers,
                        self.args.tint
                    ),
                );
                let reused = self
                    .stored_tuning
                    .iter()
                    .find(|t| t.tuned && t.method == label && &t.given_grid() == grid)
                    .cloned()
                    // A record whose numbers do not say its choice is tuned again.
                    .filter(|t| match t.check() {
                        Ok(()) => true,
                        Err(why) => {
                            (state.on_event)(RunEvent::Note(format!(
                                "{label}: stored tuning fails its check ({why}); tuned again"
                            )));
                            false
                        }
                    })
                    .or_else(|| self.donated_tuning(&label, &digest, state));
                let record = match reused {
                    Some(r) => {
                        state.done += grid.len() * self.dev.test.len();
                        r
                    }
                    None => {
                        let before = state.done;
                        // The units counted for the grid; an extension adds its own.
                        let mut grid_units = grid.len() * self.dev.test.len();
                        let record = tune_icl(
                            &label,
                            spec.parameter(),
                            grid,
                            self.args.tune_extend,
                            self.encoder,
                            self.dev,
                            &settings,
                            &mut |v| build_method(spec, v, self.args, self.models).map(|m| m.0),
                            &mut |d, grown| {
                                state.total += grown.saturating_sub(grid_units);
                                grid_units = grown.max(grid_units);
                                state.done = before + d;
                                (state.on_event)(RunEvent::Progress {
                                    done: state.done,
                                    total: state.total,
                                    message: format!("tuning {label}"),
                                });
                            },
                        )
                        .map_err(non_finite_hint(TUNING_HINT))?;
                        (state.on_event)(RunEvent::Note(record.summary()));
                        TuneRecord {
                            inputs_sha256: Some(digest),
                            ..record
                        }
                    }
                };
                values.push(record.choice);
                state.report.tuning.push(record);
                write_outputs(&state.report, &self.args.out)?;
            }
            steps.push(((format, loss), values));
        }
        Ok(steps)
    }

    /// A donor's tuning (`--cells-from`) computed from the inputs `digest` names
    /// ([`super::cell_digest::tuning_inputs_sha256`]; a record without a digest is never taken)
    /// whose numbers check, relabelled `label` (the donor may name the same tuning otherwise, e.g.
    /// with its format and loss), its source naming where it was taken from.
    fn donated_tuning(
        &self,
        label: &str,
        digest: &str,
        state: &mut RunState<'_>,
    ) -> Option<TuneRecord> {
        let (path, found) = self.donors.iter().find_map(|d| {
            d.report
                .tuning
                .iter()
                .find(|t| {
                    t.tuned && t.inputs_sha256.as_deref() == Some(digest) && t.check().is_ok()
                })
                .map(|t| (d.path.display().to_string(), t.clone()))
        })?;
        (state.on_event)(RunEvent::Note(format!(
            "{label}: the tuning of `{}` taken from {path}",
            found.method
        )));
        Some(TuneRecord {
            method: label.to_string(),
            source: format!(
                "{} (the tuning of `{}` in {path})",
                found.source, found.method
            ),
            ..found
        })
    }

    /// Whether the cell of `key` is reused instead of computed: this run's stored cell (`--resume`),
    /// else a donor's (`--cells-from`, copied into the report), where it validates and has this
    /// run's seeds, examples, method settings and digest of its inputs. A note says which was
    /// reused, or why a stored one is recomputed.
    fn reuse_cell(
        &self,
        key: &CellKey,
        settings: &IclSettings,
        cell_units: usize,
        state: &mut RunState<'_>,
    ) -> Result<bool, EvalError> {
        let (task, k, row) = (self.task, settings.k, key.row_label());
        let own = state.report.cell(key).map(|c| (None, c));
        let donated = self
            .donors
            .iter()
            .filter_map(|d| d.report.cell(key).map(|c| (Some(d.path.as_path()), c)));
        let inputs_sha256 = cell_inputs_sha256(self.eval, self.encoder, settings);
        let mut taken = None;
        for (from, stored) in own.into_iter().chain(donated) {
            let same = (k == 0 || stored.settings.seeds == settings.seeds)
                && stored.settings.n_test == self.eval.test.len()
                && stored.settings.method_settings == settings.method_settings
                && stored.inputs_sha256 == inputs_sha256;
            let place = from.map_or("stored cell".to_string(), |p| {
                format!("cell of {}", p.display())
            });
            match stored.validate() {
                Ok(()) if same => {
                    taken = Some((from, place, stored.clone()));
                    break;
                }
                Ok(()) => (state.on_event)(RunEvent::Note(format!(
                    "not reusing the {place} {row} k={k} on {task}: its seeds, examples, method \
                     settings or digest of its inputs differ from this run's (or it has no \
                     digest: a report written before them)"
                ))),
                Err(why) => (state.on_event)(RunEvent::Note(format!(
                    "not reusing the {place} {row} k={k} on {task}: stored numbers invalid ({why})"
                ))),
            }
        }
        let Some((from, place, cell)) = taken else {
            return Ok(false);
        };
        state.done += cell_units;
        (state.on_event)(RunEvent::Note(format!(
            "{place} {row} k={k} on {task} reused"
        )));
        if from.is_some() {
            state.report.upsert(cell);
            write_outputs(&state.report, &self.args.out)?;
        }
        Ok(true)
    }

    /// The cells of a method on this task among `shots` (each k, and each of `variants` at
    /// k > 0): a stored cell of a resumed report whose settings and inputs match is reused, the
    /// others run and are written as they finish. Returns each cell's key with its place in the
    /// report (the position of its k in `--shots`, then of its variant in `variants`' order).
    fn run_cells(
        &self,
        spec: &MethodSpec,
        variants: &[(DemoFormat, TrainLoss)],
        steps: &[VariantSteps],
        shots: Shots,
        state: &mut RunState<'_>,
    ) -> Result<Vec<(CellOrder, CellKey)>, EvalError> {
        let (task, eval) = (self.task, self.eval);
        let mut keys = Vec::new();
        for (k_index, &k) in self.args.shots.iter().enumerate() {
            if (k == 0) != (shots == Shots::Zero) {
                continue;
            }
            // Zero-shot cells do not train on demonstrations (format and loss do not apply).
            let cell_variants: Vec<(DemoFormat, TrainLoss)> = if k > 0 {
                variants.to_vec()
            } else {
                vec![(DemoFormat::Single, TrainLoss::LabelOnly)]
            };
            for (format, loss) in cell_variants {
                let (variant_index, values) = steps
                    .iter()
                    .enumerate()
                    .find(|(_, (v, _))| *v == (format, loss))
                    .map_or((0, &steps[0].1), |(i, (_, values))| (i, values));
                // A step tuned per seed makes a per-seed row even with one seed, so that
                // seed pieces of one protocol (`--seeds 0`, `--seeds 1`, …) name the row
                // alike and `icl-merge` joins their seed runs.
                let tuned_per_seed =
                    self.args.tune_per_seed && matches!(spec.step, Some(Step::Tune(_)));
                let (mut method, method_settings) = if values.len() == 1 && !tuned_per_seed {
                    build_method(spec, values[0], self.args, self.models)?
                } else {
                    build_per_seed(spec, values, self.args, self.models)?
                };
                let settings = IclSettings {
                    k,
                    seeds: self.args.seeds.clone(),
                    format,
                    loss,
                    balanced: self.args.balanced,
                    demos_in_context: None,
                    method_settings,
                    prior: self.prior.clone(),
                    allow_non_finite: self.args.allow_non_finite,
                };
                let key = cell_key(task, method.as_ref(), &settings);
                keys.push(((k_index, variant_index), key.clone()));
                let cell_units = if k == 0 { 1 } else { self.args.seeds.len() } * eval.test.len();
                if self.reuse_cell(&key, &settings, cell_units, state)? {
                    continue;
                }
                let before = state.done;
                let message = format!("{task} {} k={k}", key.row_label());
                let total = state.total;
                let (done, on_event) = (&mut state.done, &mut state.on_event);
                let cell = run_icl_cell(method.as_mut(), self.encoder, eval, &settings, &mut |p| {
                    *done = before + p.done;
                    on_event(RunEvent::Progress {
                        done: *done,
                        total,
                        message: message.clone(),
                    });
                })
                .map_err(non_finite_hint(RECORD_HINT))
                .map_err(|e| e.context(message.clone()))?;
                let non_finite = cell.non_finite_predictions();
                if non_finite > 0 {
                    (state.on_event)(RunEvent::Note(format!(
                        "{message}: {non_finite} prediction(s) from non-finite scores recorded \
                         as class 0 (--allow-non-finite)"
                    )));
                }
                state.done = before + cell_units;
                let seconds: f64 = cell.runs.iter().map(|r| r.seconds).sum();
                (state.on_event)(RunEvent::Note(format!(
                    "{message}: {:.1}% / calibrated {:.1}% ({seconds:.0} s)",
                    100.0 * cell.accuracy_mean,
                    100.0 * cell.calibrated_mean
                )));
                state.report.upsert(cell);
                write_outputs(&state.report, &self.args.out)?;
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_rows_settings_do_not_read_as_a_constructed_run() {
        let config = TintConfig::for_model(576, 144, 64);
        let reference = tint_settings(&config, Engine::Reference);
        assert!(
            reference
                .contains("tint-ref: the functional reference of the step, no constructed network"),
            "{reference}"
        );
        let mut constructed_config = config.clone();
        constructed_config.execution = tint_sim::Execution::Constructed;
        let constructed = tint_settings(&constructed_config, Engine::CONSTRUCTED);
        assert!(
            constructed.contains("execution: Constructed"),
            "{constructed}"
        );
        assert!(
            !constructed.contains("functional reference"),
            "{constructed}"
        );
    }

    /// A method that trains only in the Multi format (as TinT does).
    struct MultiOnly;

    impl IclMethod for MultiOnly {
        fn name(&self) -> String {
            "multi-only".into()
        }
        fn trains(&self) -> bool {
            true
        }
        fn adapt(&mut self, _: &super::super::TrainingSequences) -> Result<(), EvalError> {
            Ok(())
        }
        fn score(&mut self, _: &super::super::ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
            Ok(Vec::new())
        }
        fn supports(&self, format: DemoFormat) -> bool {
            format == DemoFormat::Multi
        }
    }

    #[test]
    fn unsupported_formats_fall_back_to_the_supported_ones() {
        let mut notes = Vec::new();
        let mut note = |n: String| notes.push(n);
        assert_eq!(
            training_formats(&MultiOnly, &[DemoFormat::Single], &mut note),
            vec![DemoFormat::Multi]
        );
        assert_eq!(
            training_formats(
                &MultiOnly,
                &[DemoFormat::Single, DemoFormat::Multi],
                &mut note
            ),
            vec![DemoFormat::Multi]
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[1].contains("using multi"), "{notes:?}");
    }

    #[test]
    fn formats_losses_and_methods_parse() {
        assert_eq!(parse_format("multi").unwrap(), DemoFormat::Multi);
        assert!(parse_format("pairs").is_err());
        assert_eq!(parse_loss("full-context").unwrap(), TrainLoss::FullContext);
        assert!(parse_loss("sum").is_err());
        let methods = |names: &[&str]| names.iter().map(|m| m.parse().unwrap()).collect();
        let args = IclRunSettings {
            methods: methods(&["icl", "dyn-eval", "tint"]),
            lr: Some(vec![1e-3, 1e-4]),
            ..Default::default()
        };
        assert_eq!(method_specs(&args).unwrap().len(), 4);
        // Without lr / inner_lr every adaptive method is tuned over its grid.
        let tuned = method_specs(&IclRunSettings {
            methods: methods(&["dyn-eval", "tint-structured"]),
            tune: vec![crate::run_settings::parse_tune("eta=1e-3,1e-2").unwrap()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            tuned[0].step,
            Some(Step::Tune(
                super::super::run_settings::DEFAULT_ICL_LR_GRID.to_vec()
            ))
        );
        assert_eq!(tuned[1].name(), "tint-structured");
        assert_eq!(tuned[1].step, Some(Step::Tune(vec![1e-3, 1e-2])));
        let given = method_specs(&IclRunSettings {
            methods: methods(&["tint"]),
            inner_lr: Some(1e-4),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(given[0].step, Some(Step::Given(1e-4)));
        assert!(method_specs(&IclRunSettings {
            methods: methods(&["tint"]),
            inner_lr: Some(-1.0),
            ..Default::default()
        })
        .is_err());
    }

    #[test]
    fn bad_settings_are_refused_before_anything_is_read() {
        let bad = |f: fn(&mut IclRunSettings)| {
            let mut args = IclRunSettings::default();
            f(&mut args);
            check(&args).unwrap_err().to_string()
        };
        assert!(bad(|a| a.out = "x.md".into()).contains("--out"));
        assert!(bad(|a| a.calibration = "none".into()).contains("--calibration"));
        assert!(bad(|a| a.data = vec!["a".into(), "b".into()]).contains("2 paths for 1 tasks"));
        assert!(bad(|a| a.formats = vec!["pairs".into()]).contains("pairs"));
        assert!(bad(|a| a.task = vec!["imdb".into()]).contains("imdb"));
        assert_eq!(
            accuracy_svg_path(Path::new("r/icl.json"), "accuracy"),
            PathBuf::from("r/icl-accuracy.svg")
        );
    }

    /// The settings string stored with every cell names the execution that actually runs (the
    /// engine picks it from the method; the flags' config alone would always say `Constructed`).
    type AB = burn::backend::Autodiff<burn::backend::Flex>;

    /// The committed micro GPT-2 and its device.
    fn micro_model() -> (AuxModel<AB>, burn::tensor::Device<AB>) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/official-tint/micro-gpt2-random");
        let device = Default::default();
        (tint_aux::load_model(&dir, &device).unwrap(), device)
    }

    #[test]
    fn recorded_settings_name_the_execution_that_runs() {
        let (model, device) = micro_model();
        let inference = model.valid();
        let models = Models::new(&model, &inference, &device, u64::MAX, 1);
        let args = IclRunSettings::default();
        for (method, execution) in [
            (Engine::CONSTRUCTED, "execution: Constructed"),
            (Engine::STRUCTURED, "execution: Structured"),
        ] {
            let spec = MethodSpec {
                method: Method::Tint(method),
                step: Some(Step::Given(1e-3)),
            };
            let (_, settings) = build_method(&spec, 1e-3, &args, &models).unwrap();
            assert!(
                settings.contains(execution) && settings.ends_with(tint_method_name(method)),
                "{settings}"
            );
        }
    }

    #[test]
    fn per_seed_rows_name_the_step_per_seed_and_record_every_seed_s_settings() {
        let (model, device) = micro_model();
        let inference = model.valid();
        let models = Models::new(&model, &inference, &device, u64::MAX, 1);
        let args = IclRunSettings {
            seeds: vec![4, 7],
            tune_per_seed: true,
            ..IclRunSettings::default()
        };
        let spec = MethodSpec {
            method: Method::DynEval,
            step: Some(Step::Tune(vec![1e-3, 3e-3])),
        };
        let (row, settings) = build_per_seed(&spec, &[1e-3, 3e-2], &args, &models).unwrap();
        assert_eq!(row.name(), "dyn-eval(lr=per-seed,steps=1)");
        let matched = MethodSpec {
            method: Method::DynEvalMatched,
            ..spec.clone()
        };
        let (matched_row, _) = build_per_seed(&matched, &[1e-3, 3e-2], &args, &models).unwrap();
        assert_eq!(matched_row.name(), "dyn-eval-matched(lr=per-seed,steps=1)");
        refuse_shared_row_names(&[spec.clone(), matched], &[row.name(), matched_row.name()])
            .unwrap();
        match refuse_shared_row_names(&[spec.clone(), spec.clone()], &[row.name(), row.name()]) {
            Err(EvalError::InvalidSetting { name, value, .. }) => {
                assert_eq!((name, value.as_str()), ("--methods", "dyn-eval,dyn-eval"));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(settings.starts_with("seed 4: ") && settings.contains("; seed 7: "));
        assert!(
            settings.contains("lr: 0.001") && settings.contains("lr: 0.03"),
            "{settings}"
        );
    }
}
