//! Scoring the blocks of one (method, train fraction) cell on several threads.
//!
//! Blocks are independent: a method adapts to each block's training part from the same unadapted
//! weights. A method that can [`LmMethod::fork`] (another instance sharing its weights) scores its
//! blocks on `workers` threads, each taking the next unscored block; the NLL of a block does not
//! depend on which thread computed it or on what runs beside it (the same operations on the same
//! inputs; `tests/all/methods.rs` compares a two-worker run with a one-worker run bit for bit).
//! On a 2-core CPU this keeps both cores busy where a single step leaves part of them idle
//! (docs/performance.md, "Blocks on both cores").

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::lm_method::LmMethod;
use crate::perplexity::BlockNll;
use crate::EvalError;

/// The NLL of the blocks, as `(block index, NLL)` in block order, computed on up to `workers`
/// threads; `on_done(finished)` is called on the calling thread after each block. Every block is
/// scored unless `stop_on_non_finite` and a block's NLL is non-finite: scoring then stops, and the
/// result holds that block (and whichever others were already scored).
///
/// # Errors
/// The error of [`LmMethod::block_nll`] with the lowest block index among the blocks scored.
pub fn score_blocks(
    method: &mut (dyn LmMethod + '_),
    blocks: &[Vec<u32>],
    train_len: usize,
    workers: usize,
    stop_on_non_finite: bool,
    on_done: &mut dyn FnMut(usize),
) -> Result<Vec<(usize, BlockNll)>, EvalError> {
    let forks: Vec<_> = if workers > 1 && blocks.len() > 1 {
        (0..workers.min(blocks.len()))
            .map_while(|_| method.fork())
            .collect()
    } else {
        Vec::new()
    };
    if forks.len() < 2 {
        drop(forks);
        let mut nlls = Vec::with_capacity(blocks.len());
        for (b, block) in blocks.iter().enumerate() {
            let nll = method.block_nll(block, train_len)?;
            let finite = nll.sum_nll.is_finite();
            nlls.push((b, nll));
            on_done(nlls.len());
            if stop_on_non_finite && !finite {
                break;
            }
        }
        return Ok(nlls);
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel::<(usize, Result<BlockNll, EvalError>)>();
    let mut slots: Vec<Option<Result<BlockNll, EvalError>>> =
        (0..blocks.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        for mut fork in forks {
            let (next, stop, sender) = (&next, &stop, sender.clone());
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let b = next.fetch_add(1, Ordering::SeqCst);
                    let Some(block) = blocks.get(b) else { break };
                    let result = fork.block_nll(block, train_len);
                    let halt = match &result {
                        Ok(nll) => stop_on_non_finite && !nll.sum_nll.is_finite(),
                        Err(_) => true,
                    };
                    if halt {
                        stop.store(true, Ordering::SeqCst);
                    }
                    if sender.send((b, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        let mut finished = 0;
        for (b, result) in receiver {
            slots[b] = Some(result);
            finished += 1;
            on_done(finished);
        }
    });
    let mut nlls = Vec::with_capacity(blocks.len());
    for (b, slot) in slots.into_iter().enumerate() {
        match slot {
            Some(Ok(nll)) => nlls.push((b, nll)),
            Some(Err(error)) => return Err(error),
            None => {}
        }
    }
    Ok(nlls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_lm_eval, LmEvalConfig};

    /// NLL = the block's first token; an error on the block starting with `fail`, NaN on `nan`.
    #[derive(Clone)]
    struct Fake {
        fail: u32,
        nan: u32,
    }

    impl LmMethod for Fake {
        fn name(&self) -> String {
            "fake".into()
        }
        fn block_nll(&mut self, block: &[u32], _: usize) -> Result<BlockNll, EvalError> {
            if block[0] == self.fail {
                return Err(EvalError::InvalidSetting {
                    name: "fake",
                    value: block[0].to_string(),
                    rule: "fails here".into(),
                });
            }
            let sum_nll = if block[0] == self.nan {
                f64::NAN
            } else {
                f64::from(block[0])
            };
            Ok(BlockNll { sum_nll, count: 1 })
        }
        fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
            Some(Box::new(self.clone()))
        }
    }

    fn blocks() -> Vec<Vec<u32>> {
        (0..9u32).map(|b| vec![b, 100, 101, 102]).collect()
    }

    #[test]
    fn blocks_come_back_in_order_and_every_one_is_reported() {
        for workers in [1, 2, 3] {
            let mut fake = Fake { fail: 99, nan: 99 };
            let mut seen = Vec::new();
            let scored = score_blocks(&mut fake, &blocks(), 1, workers, true, &mut |n| {
                seen.push(n)
            })
            .unwrap();
            let expected: Vec<(usize, f64)> = (0..9).map(|b| (b, b as f64)).collect();
            let got: Vec<(usize, f64)> = scored.iter().map(|(b, n)| (*b, n.sum_nll)).collect();
            assert_eq!(got, expected, "{workers} workers");
            assert_eq!(seen, (1..=9).collect::<Vec<_>>(), "{workers} workers");
        }
    }

    #[test]
    fn an_error_on_any_thread_is_returned() {
        for workers in [1, 2] {
            let mut fake = Fake { fail: 4, nan: 99 };
            let err = score_blocks(&mut fake, &blocks(), 1, workers, true, &mut |_| {})
                .unwrap_err()
                .to_string();
            assert!(err.contains("fails here") && err.contains('4'), "{err}");
        }
    }

    #[test]
    fn a_non_finite_block_is_named_with_its_index_on_several_threads_too() {
        let config = |allow_non_finite, workers| LmEvalConfig {
            block_size: 4,
            train_fractions: vec![0.5],
            bootstrap_resamples: 5,
            allow_non_finite,
            workers,
            ..Default::default()
        };
        for workers in [1, 2] {
            let run = |config: &LmEvalConfig| {
                let mut methods: Vec<Box<dyn LmMethod>> = vec![Box::new(Fake { fail: 99, nan: 5 })];
                run_lm_eval(
                    &blocks(),
                    config,
                    &mut methods,
                    serde_json::json!({}),
                    &[],
                    &mut |_| {},
                )
            };
            let err = run(&config(false, workers)).unwrap_err().to_string();
            assert!(
                err.contains("evaluation block 5 at train fraction 0.5"),
                "{workers} workers: {err}"
            );
            let report = run(&config(true, workers)).unwrap();
            let nlls: Vec<f64> = report.results[0].blocks.iter().map(|b| b.sum_nll).collect();
            assert_eq!(nlls.len(), 9);
            assert!(
                nlls[5].is_nan() && nlls[4] == 4.0 && nlls[6] == 6.0,
                "{nlls:?}"
            );
        }
    }
}
