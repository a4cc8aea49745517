//! `cargo xtask eval icl`: in-context classification (paper Table 1, appendix L) — tasks × methods ×
//! shots × formats × losses, seeds per cell, with and without calibration. Writes `OUT.json` (every
//! setting, seed and prediction; `--resume` skips its finished cells), `OUT.md` (the paper's layout)
//! and `OUT-accuracy.svg` / `OUT-accuracy-calibrated.svg`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use indicatif::{ProgressBar, ProgressStyle};
use tint_aux::{AuxModel, DynEvalConfig, ParamSelection};
use tint_eval::icl::loaders::{load_offline_task, load_task_dir};
use tint_eval::icl::{
    accuracy_bars_svg, cell_key, run_icl_cell, DemoFormat, DynEvalIcl, IclMethod, IclReport,
    IclSettings, PlainIcl, PromptEncoder, TaskData, TaskKind, Template, TintIcl, TrainLoss,
};
use tint_eval::methods::Tint;

use crate::backend::{device, AB, B, BACKEND_NAME};
use crate::model_arg::{load_aux, load_tokenizer, ModelArg};

/// Arguments of `cargo xtask eval icl`.
#[derive(clap::Args, Debug, Clone)]
pub struct IclArgs {
    /// Auxiliary model: a directory, a .gguf file or `smollm2` (fetched on demand).
    #[arg(long, default_value = "smollm2")]
    pub model: ModelArg,
    /// Tasks, comma-separated: mr-snippets, cr-snippets, bbc-topics, amazon-fine-food (offline
    /// data, fetched on demand), or sst2, mr, cr, mpqa, subj, agnews, amazon (need --data).
    #[arg(long, value_delimiter = ',', default_value = "mr-snippets")]
    pub task: Vec<String>,
    /// Data location, one per task in order (a task directory in the standard layout; the snippet
    /// file, the BBC `data` directory, or the fine-food directory / `.rda` file). Default for the
    /// offline tasks: their asset (fetched on demand).
    #[arg(long, value_delimiter = ',')]
    pub data: Vec<PathBuf>,
    /// Methods, comma-separated: icl, dyn-eval, tint, tint-ref.
    #[arg(long, value_delimiter = ',', default_value = "icl,dyn-eval")]
    pub methods: Vec<String>,
    /// Numbers of demonstrations, comma-separated (0 = zero-shot).
    #[arg(long, value_delimiter = ',', default_value = "0,32")]
    pub shots: Vec<usize>,
    /// Seeds of the demonstration draws (one run each for k > 0).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2")]
    pub seeds: Vec<u64>,
    /// Training formats for training methods, comma-separated: single, multi.
    #[arg(long, value_delimiter = ',', default_value = "single")]
    pub formats: Vec<String>,
    /// Training losses for training methods, comma-separated: label, full-context.
    #[arg(long, value_delimiter = ',', default_value = "label")]
    pub losses: Vec<String>,
    /// Evaluation examples per task (offline tasks: held out of the file; standard tasks: a seeded
    /// subsample of the test file).
    #[arg(long, default_value_t = 200)]
    pub n_test: usize,
    /// Seed of the held-out split and of the evaluation subsample.
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
    /// Inputs are cut to this many tokens.
    #[arg(long, default_value_t = 96)]
    pub max_input_tokens: usize,
    /// Draw k / n_classes demonstrations per class.
    #[arg(long)]
    pub balanced: bool,
    /// Dynamic-evaluation learning rates (on the MEAN loss over the targets), comma-separated; each
    /// is its own row.
    #[arg(long, value_delimiter = ',', default_value = "1e-3")]
    pub lr: Vec<f64>,
    /// SGD steps of dynamic evaluation (simulated steps of TinT).
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Dynamic evaluation trains the top N blocks (and the final norm), or `all`.
    #[arg(long, default_value = "all")]
    pub train_layers: String,
    /// TinT inner learning rate `eta` (on the SUMMED loss).
    #[arg(long, default_value_t = 1e-5)]
    pub inner_lr: f64,
    /// TinT hyper-parameters.
    #[command(flatten)]
    pub tint: crate::eval::TintFlags,
    /// Output JSON file; markdown and SVG plots are written next to it.
    #[arg(long, default_value = "results/icl.json")]
    pub out: PathBuf,
    /// Keep the finished cells of an existing OUT.json and run only the missing ones.
    #[arg(long)]
    pub resume: bool,
}

impl Default for IclArgs {
    /// The command-line defaults (for suites that build the arguments in code).
    fn default() -> Self {
        Self {
            model: ModelArg::SmolLm2,
            task: vec!["mr-snippets".into()],
            data: Vec::new(),
            methods: vec!["icl".into(), "dyn-eval".into()],
            shots: vec![0, 32],
            seeds: vec![0, 1, 2],
            formats: vec!["single".into()],
            losses: vec!["label".into()],
            n_test: 200,
            split_seed: 0,
            max_input_tokens: 96,
            balanced: false,
            lr: vec![1e-3],
            steps: 1,
            train_layers: "all".into(),
            inner_lr: 1e-5,
            tint: crate::eval::TintFlags::default(),
            out: PathBuf::from("results/icl.json"),
            resume: false,
        }
    }
}

fn parse_format(name: &str) -> Result<DemoFormat> {
    Ok(match name {
        "single" => DemoFormat::Single,
        "multi" => DemoFormat::Multi,
        _ => bail!("unknown format {name:?}: expected single or multi"),
    })
}

fn parse_loss(name: &str) -> Result<TrainLoss> {
    Ok(match name {
        "label" | "label-only" => TrainLoss::LabelOnly,
        "full" | "full-context" => TrainLoss::FullContext,
        _ => bail!("unknown loss {name:?}: expected label or full-context"),
    })
}

/// Loads a task from `data` or, for the offline tasks, from the fetched asset (`sentiment-snippets`,
/// `bbc-topics`, `amazon-fine-food`, downloaded into the cache on first use).
fn load_task(task: TaskKind, data: Option<&Path>, args: &IclArgs) -> Result<TaskData> {
    let asset = |name: &str| crate::fetch::ensure_asset(name, &crate::fetch::cache_dir());
    let path = match (data, task) {
        (Some(path), _) => path.to_path_buf(),
        (None, TaskKind::MrSnippets) => {
            asset("sentiment-snippets")?.join("movieReviewSnippets_GroundTruth.txt")
        }
        (None, TaskKind::CrSnippets) => {
            asset("sentiment-snippets")?.join("amazonReviewSnippets_GroundTruth.txt")
        }
        (None, TaskKind::BbcTopics) => asset("bbc-topics")?,
        (None, TaskKind::AmazonFineFood) => asset("amazon-fine-food")?,
        (None, _) => bail!("task {task} needs --data (its directory or file)"),
    };
    let mut data = if matches!(
        task,
        TaskKind::MrSnippets
            | TaskKind::CrSnippets
            | TaskKind::BbcTopics
            | TaskKind::AmazonFineFood
    ) {
        load_offline_task(task, &path, args.n_test, args.split_seed)?
    } else {
        load_task_dir(task, &path)?
    };
    data.subsample_test(args.n_test, args.split_seed);
    Ok(data)
}

fn dyn_eval_config(args: &IclArgs, lr: f64) -> Result<DynEvalConfig> {
    let params = match args.train_layers.as_str() {
        "all" => ParamSelection::all(),
        n => ParamSelection::top_layers(
            n.parse()
                .with_context(|| format!("--train-layers {n:?}: expected a number or `all`"))?,
        ),
    };
    Ok(DynEvalConfig {
        lr,
        steps: args.steps,
        params,
        ..Default::default()
    })
}

/// One method instance per (method name, lr) pair.
enum MethodSpec {
    Icl,
    DynEval(f64),
    Tint { reference: bool },
}

fn method_specs(args: &IclArgs) -> Result<Vec<MethodSpec>> {
    let mut specs = Vec::new();
    for name in &args.methods {
        match name.as_str() {
            "icl" | "vanilla" => specs.push(MethodSpec::Icl),
            "dyn-eval" => specs.extend(args.lr.iter().map(|&lr| MethodSpec::DynEval(lr))),
            "tint" => specs.push(MethodSpec::Tint { reference: false }),
            "tint-ref" => specs.push(MethodSpec::Tint { reference: true }),
            _ => bail!("unknown method {name:?}: expected icl, dyn-eval, tint or tint-ref"),
        }
    }
    Ok(specs)
}

fn write_outputs(report: &IclReport, out: &Path) -> Result<()> {
    report.write_json(out)?;
    std::fs::write(out.with_extension("md"), report.markdown())
        .with_context(|| format!("writing {}", out.with_extension("md").display()))?;
    let stem = out.with_extension("");
    for (calibrated, suffix) in [(false, "accuracy"), (true, "accuracy-calibrated")] {
        let path = PathBuf::from(format!("{}-{suffix}.svg", stem.display()));
        std::fs::write(&path, accuracy_bars_svg(report, calibrated)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The requested formats `method` trains in. A format it cannot train in is skipped with a note;
/// if that leaves none (TinT asked for the default `single`), the formats it supports are used
/// instead, so `--methods tint` alone still runs its k-shot cells.
fn training_formats(method: &dyn IclMethod, requested: &[DemoFormat]) -> Vec<DemoFormat> {
    let supported: Vec<DemoFormat> = requested
        .iter()
        .copied()
        .filter(|&f| method.supports(f))
        .collect();
    for format in requested.iter().filter(|&&f| !method.supports(f)) {
        eprintln!(
            "{} does not train in the {} format: skipped",
            method.name(),
            format.name()
        );
    }
    if !supported.is_empty() {
        return supported;
    }
    let fallback: Vec<DemoFormat> = [DemoFormat::Single, DemoFormat::Multi]
        .into_iter()
        .filter(|&f| method.supports(f))
        .collect();
    let names: Vec<&str> = fallback.iter().map(|f| f.name()).collect();
    eprintln!(
        "{}: none of the requested formats applies; using {}",
        method.name(),
        names.join(", ")
    );
    fallback
}

/// Runs `cargo xtask eval icl`; returns the report it wrote.
pub fn run(args: &IclArgs) -> Result<()> {
    run_report(args).map(|_| ())
}

/// As [`run`], returning the report (for suites that embed it in a document).
pub fn run_report(args: &IclArgs) -> Result<IclReport> {
    let tasks: Vec<TaskKind> = args
        .task
        .iter()
        .map(|t| TaskKind::parse(t))
        .collect::<Result<_, _>>()?;
    if !args.data.is_empty() && args.data.len() != tasks.len() {
        bail!(
            "--data takes one path per task ({} tasks, {} paths)",
            tasks.len(),
            args.data.len()
        );
    }
    let formats: Vec<DemoFormat> = args
        .formats
        .iter()
        .map(|f| parse_format(f))
        .collect::<Result<_>>()?;
    let losses: Vec<TrainLoss> = args
        .losses
        .iter()
        .map(|l| parse_loss(l))
        .collect::<Result<_>>()?;
    let specs = method_specs(args)?;
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }

    let device = device();
    let tokenizer = load_tokenizer(&args.model)?;
    let model: AuxModel<AB> = load_aux(&args.model, &device)?;
    let inference: AuxModel<B> = model.valid();

    let mut report = if args.resume && args.out.is_file() {
        let report = IclReport::read_json(&args.out)?;
        if report.model != args.model.to_string() {
            bail!(
                "--resume: {} holds results of model {:?}, not {:?}; use another --out",
                args.out.display(),
                report.model,
                args.model.to_string()
            );
        }
        report
    } else {
        IclReport::new(args.model.to_string(), BACKEND_NAME)
    };

    for (t, &task) in tasks.iter().enumerate() {
        let data = load_task(task, args.data.get(t).map(PathBuf::as_path), args)
            .with_context(|| format!("loading task {task}"))?;
        let template = Template::for_task(task);
        let encoder = PromptEncoder::new(
            &tokenizer,
            &template,
            args.max_input_tokens,
            inference.max_positions(),
        )?;
        for spec in &specs {
            let (mut method, method_settings): (Box<dyn IclMethod + '_>, String) = match spec {
                MethodSpec::Icl => (Box::new(PlainIcl { model: &inference }), String::new()),
                MethodSpec::DynEval(lr) => {
                    let config = dyn_eval_config(args, *lr)?;
                    let settings = format!("{config:?}");
                    (Box::new(DynEvalIcl::new(&model, config)), settings)
                }
                MethodSpec::Tint { reference } => {
                    let config = args.tint.config(&inference, args.inner_lr, args.steps)?;
                    let settings = format!("{config:?}");
                    let tint = if *reference {
                        Tint::reference(&inference, config)?
                    } else {
                        Tint::simulator(&inference, config)?
                    };
                    let name = if *reference { "tint-ref" } else { "tint" };
                    let label = format!("{name}(eta={:e},steps={})", args.inner_lr, args.steps);
                    (Box::new(TintIcl::new(tint, label, &device)), settings)
                }
            };
            for &k in &args.shots {
                // Formats and losses matter only when the method trains on demonstrations.
                let variants: Vec<(DemoFormat, TrainLoss)> = if method.trains() && k > 0 {
                    training_formats(method.as_ref(), &formats)
                        .into_iter()
                        .flat_map(|f| losses.iter().map(move |&l| (f, l)))
                        .collect()
                } else {
                    vec![(DemoFormat::Single, TrainLoss::LabelOnly)]
                };
                for (format, loss) in variants {
                    let settings = IclSettings {
                        k,
                        seeds: args.seeds.clone(),
                        format,
                        loss,
                        balanced: args.balanced,
                        demos_in_context: None,
                        method_settings: method_settings.clone(),
                    };
                    let key = cell_key(task, method.as_ref(), &settings);
                    if let Some(done) = report.cell(&key) {
                        if done.settings.seeds == settings.seeds
                            && done.settings.n_test == data.test.len()
                            && done.settings.method_settings == settings.method_settings
                        {
                            eprintln!("skipping finished cell {} k={k} on {task}", key.row_label());
                            continue;
                        }
                        eprintln!(
                            "recomputing cell {} k={k} on {task}: its seeds, examples or method \
                             settings differ from this run's",
                            key.row_label()
                        );
                    }
                    let bar = ProgressBar::new(0);
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{msg} [{elapsed_precise}] {bar:30} {pos}/{len} (eta {eta})",
                        )
                        .expect("valid progress template"),
                    );
                    bar.set_message(format!("{task} {} k={k}", key.row_label()));
                    let cell =
                        run_icl_cell(method.as_mut(), &encoder, &data, &settings, &mut |p| {
                            bar.set_length(p.total as u64);
                            bar.set_position(p.done as u64);
                        })
                        .with_context(|| format!("{task} {} k={k}", key.row_label()))?;
                    let seconds: f64 = cell.runs.iter().map(|r| r.seconds).sum();
                    let summary = format!(
                        "{task} {} k={k}: {:.1}% / calibrated {:.1}% ({seconds:.0} s)",
                        key.row_label(),
                        100.0 * cell.accuracy_mean,
                        100.0 * cell.calibrated_mean
                    );
                    if bar.is_hidden() {
                        eprintln!("{summary}");
                    }
                    bar.finish_with_message(summary);
                    report.upsert(cell);
                    write_outputs(&report, &args.out)?;
                }
            }
        }
    }
    write_outputs(&report, &args.out)?;
    println!("{}", report.markdown());
    println!("report: {}", args.out.display());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        icl: IclArgs,
    }

    #[test]
    fn default_matches_the_command_line_defaults() {
        let parsed = Wrapper::try_parse_from(["icl"]).unwrap().icl;
        assert_eq!(format!("{parsed:?}"), format!("{:?}", IclArgs::default()));
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
        fn adapt(
            &mut self,
            _: &tint_eval::icl::TrainingSequences,
        ) -> Result<(), tint_eval::icl::IclError> {
            Ok(())
        }
        fn score(
            &mut self,
            _: &tint_eval::icl::ScoreRequest<'_>,
        ) -> Result<Vec<f64>, tint_eval::icl::IclError> {
            Ok(Vec::new())
        }
        fn supports(&self, format: DemoFormat) -> bool {
            format == DemoFormat::Multi
        }
    }

    #[test]
    fn unsupported_formats_fall_back_to_the_supported_ones() {
        let method = MultiOnly;
        assert_eq!(
            training_formats(&method, &[DemoFormat::Single]),
            vec![DemoFormat::Multi]
        );
        assert_eq!(
            training_formats(&method, &[DemoFormat::Single, DemoFormat::Multi]),
            vec![DemoFormat::Multi]
        );
    }

    #[test]
    fn formats_losses_and_methods_parse() {
        assert_eq!(parse_format("multi").unwrap(), DemoFormat::Multi);
        assert!(parse_format("pairs").is_err());
        assert_eq!(parse_loss("full-context").unwrap(), TrainLoss::FullContext);
        assert!(parse_loss("sum").is_err());
        let args = IclArgs {
            methods: vec!["icl".into(), "dyn-eval".into(), "tint".into()],
            lr: vec![1e-3, 1e-4],
            ..Default::default()
        };
        assert_eq!(method_specs(&args).unwrap().len(), 4);
        let bad = IclArgs {
            methods: vec!["gpt4".into()],
            ..Default::default()
        };
        assert!(method_specs(&bad).is_err());
    }
}
