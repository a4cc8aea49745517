//! Language-modelling evaluation (paper Table 2): every block of a corpus is split into a training part
//! (the first `floor(T · f)` tokens) and an evaluated part; each method may adapt to the training part, then
//! is scored by next-token NLL on the evaluated targets `Ltr .. T-1` (predicted from positions
//! `Ltr-1 .. T-2`, with the whole block as context).

use std::time::Instant;

use crate::blocks::BlockSpec;
pub use crate::lm_method::LmMethod;
use crate::lm_workers::score_blocks;
use crate::perplexity::bootstrap;
use crate::report::{LmReport, MethodResult};
use crate::EvalError;
use tint_lab::paired::PairedSettings;

/// The SHA-256 (hex) of one LM cell's inputs: the method's [`LmMethod::settings`], the train
/// fraction, the block size and every evaluated block's token ids, in order. Stored in the cell
/// ([`MethodResult::inputs_sha256`]); `--resume` reuses a stored cell only when this run computes
/// the same digest for it (issue 66 item 4).
pub fn cell_inputs_sha256(
    method_settings: &str,
    train_fraction: f64,
    block_size: usize,
    blocks: &[Vec<u32>],
) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for part in [
        method_settings.as_bytes(),
        &train_fraction.to_bits().to_le_bytes(),
        &(block_size as u64).to_le_bytes(),
        &(blocks.len() as u64).to_le_bytes(),
    ] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    for block in blocks {
        hash.update((block.len() as u64).to_le_bytes());
        for id in block {
            hash.update(id.to_le_bytes());
        }
    }
    format!("{:x}", hash.finalize())
}

/// Settings of one language-modelling evaluation.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LmEvalConfig {
    /// Tokens per block.
    pub block_size: usize,
    /// Train fractions to evaluate, e.g. `[0.3, 0.5, 0.7, 0.9]`.
    pub train_fractions: Vec<f64>,
    /// Confidence level of the bootstrap intervals.
    pub ci_level: f64,
    /// Number of bootstrap resamples.
    pub bootstrap_resamples: usize,
    /// Seed of the bootstrap.
    pub seed: u64,
    /// Record a non-finite block NLL in the report (its cell's perplexity is then NaN) instead of
    /// failing with [`EvalError::NonFinite`].
    #[serde(default)]
    pub allow_non_finite: bool,
    /// Threads that score the blocks of a cell when its method can fork ([`LmMethod::fork`]);
    /// not serialised: the NLLs do not depend on it.
    #[serde(skip, default = "one_worker")]
    pub workers: usize,
}

fn one_worker() -> usize {
    1
}

impl Default for LmEvalConfig {
    fn default() -> Self {
        Self {
            block_size: 256,
            train_fractions: vec![0.3, 0.5, 0.7, 0.9],
            ci_level: 0.95,
            bootstrap_resamples: 1000,
            seed: 0,
            allow_non_finite: false,
            workers: 1,
        }
    }
}

/// Progress of a run, reported after each (fraction, method, block).
#[derive(Debug, Clone)]
pub struct LmProgress {
    /// Finished units of work.
    pub done: usize,
    /// All units of work.
    pub total: usize,
    /// What just finished, for display.
    pub message: String,
    /// A (method, train fraction) cell finished with this update (computed or taken from
    /// `previous`), so callers can write partial reports that a later run resumes from.
    pub cell: Option<MethodResult>,
}

/// One [`BlockSpec`] per train fraction of `config`, after checking that there is a fraction, a
/// block, and that every block has the block size.
fn fraction_specs(blocks: &[Vec<u32>], config: &LmEvalConfig) -> Result<Vec<BlockSpec>, EvalError> {
    if config.train_fractions.is_empty() {
        return Err(EvalError::InvalidSetting {
            name: "--train-fraction",
            value: "[]".into(),
            rule: "give at least one train fraction".into(),
        });
    }
    if blocks.is_empty() {
        return Err(EvalError::InvalidSetting {
            name: "blocks",
            value: "0".into(),
            rule: "evaluate at least one block".into(),
        });
    }
    if let Some(bad) = blocks.iter().find(|b| b.len() != config.block_size) {
        return Err(EvalError::InvalidSetting {
            name: "--block-size",
            value: format!("a block of {} tokens", bad.len()),
            rule: "every block must have block_size tokens".into(),
        });
    }
    let specs: Vec<BlockSpec> = config
        .train_fractions
        .iter()
        .map(|&train_fraction| BlockSpec {
            block_size: config.block_size,
            train_fraction,
            max_blocks: 1,
        })
        .collect();
    for s in &specs {
        s.validate()?;
    }
    Ok(specs)
}

/// Scores one method on every block at one train fraction into its cell (perplexity with its
/// bootstrap interval): a non-finite NLL stops the run unless the config allows it (then it is
/// reported and recorded). `progress` hears of each block; `(done, total)` are the run's units
/// before this cell and in all; `note` follows each block's message (a stored cell recomputed).
#[allow(clippy::too_many_arguments)]
fn score_cell(
    method: &mut (dyn LmMethod + '_),
    blocks: &[Vec<u32>],
    spec: &BlockSpec,
    config: &LmEvalConfig,
    inputs_sha256: String,
    note: &str,
    (done, total): (usize, usize),
    progress: &mut dyn FnMut(LmProgress),
) -> Result<MethodResult, EvalError> {
    let name = method.name();
    let train_len = spec.train_len();
    let start = Instant::now();
    let mut message = |finished: usize| {
        progress(LmProgress {
            done: done + finished,
            total,
            message: format!(
                "{name} f={:.1} block {finished}/{}{note}",
                spec.train_fraction,
                blocks.len()
            ),
            cell: None,
        });
    };
    let scored = score_blocks(
        method,
        blocks,
        train_len,
        config.workers,
        !config.allow_non_finite,
        &mut message,
    )?;
    let done = done + blocks.len();
    let mut nlls = Vec::with_capacity(blocks.len());
    for (b, nll) in scored {
        if !nll.sum_nll.is_finite() {
            let error = EvalError::NonFinite {
                method: name.clone(),
                quantity: "NLL",
                location: format!(
                    "evaluation block {b} at train fraction {}",
                    spec.train_fraction
                ),
                value: nll.sum_nll,
                origin: method.non_finite_origin(&blocks[b], train_len),
            };
            if !config.allow_non_finite {
                return Err(error);
            }
            progress(LmProgress {
                done,
                total,
                message: format!("{name}: recorded: {error}"),
                cell: None,
            });
        }
        nlls.push(nll);
    }
    let cell = MethodResult {
        method: name,
        train_fraction: spec.train_fraction,
        perplexity: bootstrap(
            &nlls,
            config.ci_level,
            config.bootstrap_resamples,
            config.seed,
        ),
        blocks: nlls,
        seconds: start.elapsed().as_secs_f64(),
        inputs_sha256,
    };
    Ok(cell)
}

/// Runs every method on every block at every train fraction.
///
/// `blocks` are the evaluated blocks (all of `config.block_size` tokens; see
/// [`crate::lm_split::LmSplit`], which keeps them apart from the tuning blocks). `settings` is
/// recorded verbatim in the report next to this config, so callers put the model, corpus and method
/// hyper-parameters there. The first cell of `previous` with the same method name and train
/// fraction that passes [`crate::resume::validate_cell`] for these blocks and has this run's
/// digest of its inputs is taken as it is instead of being recomputed (`--resume`, then
/// `--cells-from`); where none does, the cell is recomputed. The caller is responsible for
/// `previous` coming from the same model, text and code ([`crate::resume`],
/// [`crate::lm_donors`]).
pub fn run_lm_eval(
    blocks: &[Vec<u32>],
    config: &LmEvalConfig,
    methods: &mut [Box<dyn LmMethod + '_>],
    settings: serde_json::Value,
    previous: &[MethodResult],
    progress: &mut dyn FnMut(LmProgress),
) -> Result<LmReport, EvalError> {
    let specs = fraction_specs(blocks, config)?;
    let total = specs.len() * methods.len() * blocks.len();
    let mut done = 0;
    let mut results = Vec::new();
    for spec in &specs {
        for method in methods.iter_mut() {
            let name = method.name();
            let inputs_sha256 = cell_inputs_sha256(
                &method.settings(),
                spec.train_fraction,
                config.block_size,
                blocks,
            );
            // The first stored cell of this method and fraction that checks is taken; where
            // none does, the first one's failure is told.
            let mut note = String::new();
            let mut taken = None;
            for done_cell in previous.iter().filter(|r| {
                r.method == name && (r.train_fraction - spec.train_fraction).abs() < 1e-12
            }) {
                let checked =
                    crate::resume::validate_cell(done_cell, blocks.len(), config.block_size)
                        .and_then(|()| crate::resume::check_inputs(done_cell, &inputs_sha256));
                match checked {
                    Ok(()) => {
                        taken = Some(done_cell);
                        break;
                    }
                    Err(reason) if note.is_empty() => {
                        note = format!(" (stored cell recomputed: {reason})");
                    }
                    Err(_) => {}
                }
            }
            if let Some(done_cell) = taken {
                done += blocks.len();
                results.push(done_cell.clone());
                progress(LmProgress {
                    done,
                    total,
                    message: format!("{name} f={:.1} (resumed)", spec.train_fraction),
                    cell: Some(done_cell.clone()),
                });
                continue;
            }
            let cell = score_cell(
                method.as_mut(),
                blocks,
                spec,
                config,
                inputs_sha256,
                &note,
                (done, total),
                progress,
            )?;
            done += blocks.len();
            progress(LmProgress {
                done,
                total,
                message: format!("{} f={:.1} done", cell.method, cell.train_fraction),
                cell: Some(cell.clone()),
            });
            results.push(cell);
        }
    }
    let settings = serde_json::json!({
        "eval": config,
        "blocks": blocks.len(),
        "run": settings,
    });
    let mut report = LmReport {
        settings,
        results,
        paired: Vec::new(),
        tuning: Vec::new(),
    };
    report.compute_paired(&PairedSettings {
        level: config.ci_level,
        seed: config.seed,
        ..Default::default()
    });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::non_finite::NonFiniteOrigin;
    use crate::perplexity::BlockNll;

    /// A method whose NLL is a known function of the block, to check the bookkeeping.
    struct Counting {
        calls: usize,
    }

    impl LmMethod for Counting {
        fn name(&self) -> String {
            "counting".into()
        }
        fn settings(&self) -> String {
            "counting: step 0.5".into()
        }
        fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
            self.calls += 1;
            let count = block.len() - train_len;
            Ok(BlockNll {
                sum_nll: count as f64 * 0.5,
                count,
            })
        }
    }

    #[test]
    fn runs_every_method_block_and_fraction() {
        let tokens: Vec<Vec<u32>> = (0..4).map(|b| (10 * b..10 * b + 10).collect()).collect();
        let config = LmEvalConfig {
            block_size: 10,
            train_fractions: vec![0.3, 0.5],
            bootstrap_resamples: 10,
            ..Default::default()
        };
        let mut counting = Counting { calls: 0 };
        let mut seen = 0;
        {
            let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![Box::new(&mut counting)];
            let report = run_lm_eval(
                &tokens,
                &config,
                &mut methods,
                serde_json::json!({}),
                &[],
                &mut |p| seen = p.done,
            )
            .unwrap();
            assert_eq!(report.results.len(), 2);
            // 3 and 5 training tokens of 10: 7 and 5 evaluated targets per block.
            assert_eq!(report.results[0].perplexity.tokens, 4 * 7);
            assert_eq!(report.results[1].perplexity.tokens, 4 * 5);
            assert!((report.results[0].perplexity.value - 0.5f64.exp()).abs() < 1e-12);
        }
        assert_eq!(counting.calls, 8);
        assert_eq!(seen, 8);
    }

    #[test]
    fn resumed_cells_are_reused_and_the_rest_computed() {
        let tokens: Vec<Vec<u32>> = (0..4).map(|b| (10 * b..10 * b + 10).collect()).collect();
        let config = LmEvalConfig {
            block_size: 10,
            train_fractions: vec![0.3, 0.5],
            bootstrap_resamples: 10,
            ..Default::default()
        };
        let mut first = Counting { calls: 0 };
        let full = {
            let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![Box::new(&mut first)];
            run_lm_eval(
                &tokens,
                &config,
                &mut methods,
                serde_json::json!({}),
                &[],
                &mut |_| {},
            )
            .unwrap()
        };
        // Pretend the run stopped after the first cell; mark it so reuse is visible.
        let mut finished = full.results[0].clone();
        finished.seconds = 12345.0;
        let mut second = Counting { calls: 0 };
        let mut cells = Vec::new();
        let resumed = {
            let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![Box::new(&mut second)];
            run_lm_eval(
                &tokens,
                &config,
                &mut methods,
                serde_json::json!({}),
                std::slice::from_ref(&finished),
                &mut |p| cells.extend(p.cell),
            )
            .unwrap()
        };
        assert_eq!(second.calls, 4, "only the 0.5 cell is recomputed");
        assert_eq!(resumed.results[0].seconds, 12345.0);
        assert_eq!(
            resumed.results[1].perplexity.value,
            full.results[1].perplexity.value
        );
        assert_eq!(cells.len(), 2, "one cell event per (method, fraction)");
    }

    /// Issue 66 item 4: a stored cell is reused only when this run computes the same digest of
    /// its inputs — not after the method's settings changed under the same name, not for other
    /// blocks of the same count and size, not without a digest; the reason is in the progress.
    #[test]
    fn a_stored_cell_with_other_inputs_is_recomputed() {
        struct Renamed(Counting, &'static str);
        impl LmMethod for Renamed {
            fn name(&self) -> String {
                self.0.name()
            }
            fn block_nll(
                &mut self,
                block: &[u32],
                train_len: usize,
            ) -> Result<BlockNll, EvalError> {
                self.0.block_nll(block, train_len)
            }
            fn settings(&self) -> String {
                self.1.into()
            }
        }
        let tokens: Vec<Vec<u32>> = (0..4).map(|b| (10 * b..10 * b + 10).collect()).collect();
        let config = LmEvalConfig {
            block_size: 10,
            train_fractions: vec![0.5],
            bootstrap_resamples: 10,
            ..Default::default()
        };
        let run = |blocks: &[Vec<u32>], settings: &'static str, previous: &[MethodResult]| {
            let mut method = Renamed(Counting { calls: 0 }, settings);
            let mut notes = Vec::new();
            let report = {
                let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![Box::new(&mut method)];
                run_lm_eval(
                    blocks,
                    &config,
                    &mut methods,
                    serde_json::json!({}),
                    previous,
                    &mut |p| notes.push(p.message),
                )
                .unwrap()
            };
            (report, method.0.calls, notes.join("\n"))
        };
        let (full, calls, _) = run(&tokens, "lr 1e-3", &[]);
        assert_eq!(calls, 4);
        let stored = full.results[0].clone();
        assert_eq!(
            stored.inputs_sha256,
            cell_inputs_sha256("lr 1e-3", 0.5, 10, &tokens)
        );
        // The same inputs: reused.
        assert_eq!(run(&tokens, "lr 1e-3", std::slice::from_ref(&stored)).1, 0);
        // Other settings under the same name: recomputed, and said why.
        let (_, calls, notes) = run(&tokens, "lr 3e-3", std::slice::from_ref(&stored));
        assert_eq!(calls, 4);
        assert!(
            notes.contains("its inputs (method settings, train fraction, blocks) differ"),
            "{notes}"
        );
        // Other blocks of the same count and size.
        let mut other = tokens.clone();
        other[3][9] = 99;
        assert_eq!(run(&other, "lr 1e-3", std::slice::from_ref(&stored)).1, 4);
        // No digest (a report written before them).
        let mut old = stored.clone();
        old.inputs_sha256.clear();
        let (_, calls, notes) = run(&tokens, "lr 1e-3", std::slice::from_ref(&old));
        assert_eq!(calls, 4);
        assert!(notes.contains("no digest of its inputs"), "{notes}");
        // A failing cell before a good one (a resumed report's, then a --cells-from donor's):
        // the good one is taken.
        let (report, calls, _) = run(&tokens, "lr 1e-3", &[old, stored.clone()]);
        assert_eq!(calls, 0);
        assert_eq!(report.results[0].seconds, stored.seconds);
    }

    #[test]
    fn non_finite_losses_are_errors_unless_allowed() {
        /// NaN on its second call (block 1), with a known origin.
        struct NanOnSecond(usize);
        impl LmMethod for NanOnSecond {
            fn name(&self) -> String {
                "nan".into()
            }
            fn block_nll(&mut self, _: &[u32], _: usize) -> Result<BlockNll, EvalError> {
                self.0 += 1;
                Ok(BlockNll {
                    sum_nll: if self.0 == 2 { f64::NAN } else { 1.0 },
                    count: 5,
                })
            }
            fn non_finite_origin(&mut self, _: &[u32], _: usize) -> NonFiniteOrigin {
                NonFiniteOrigin::Update("step 1e300".into())
            }
        }
        let tokens: Vec<Vec<u32>> = vec![(0..10).collect(), (10..20).collect()];
        let mut config = LmEvalConfig {
            block_size: 10,
            train_fractions: vec![0.5],
            bootstrap_resamples: 10,
            ..Default::default()
        };
        let run = |config: &LmEvalConfig| {
            let mut methods: Vec<Box<dyn LmMethod>> = vec![Box::new(NanOnSecond(0))];
            run_lm_eval(
                &tokens,
                config,
                &mut methods,
                serde_json::json!({}),
                &[],
                &mut |_| {},
            )
        };
        let err = run(&config).unwrap_err();
        match &err {
            EvalError::NonFinite {
                method,
                quantity,
                location,
                value,
                origin,
            } => {
                assert_eq!(method, "nan");
                assert_eq!(*quantity, "NLL");
                assert_eq!(location, "evaluation block 1 at train fraction 0.5");
                assert!(value.is_nan());
                assert_eq!(*origin, NonFiniteOrigin::Update("step 1e300".into()));
            }
            other => panic!("expected NonFinite, got {other}"),
        }
        assert!(err.to_string().contains("update (step 1e300)"), "{err}");
        config.allow_non_finite = true;
        let report = run(&config).unwrap();
        assert!(report.results[0].blocks[1].sum_nll.is_nan());
        assert_eq!(report.results[0].blocks[0].sum_nll, 1.0);
        assert!(report.results[0].perplexity.value.is_nan());
    }
}
