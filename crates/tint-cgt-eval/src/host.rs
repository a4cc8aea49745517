//! How a CGT run reports to its front end: the caller's side is [`tint_lab::Host`] (progress
//! through [`Reporter`](tint_lab::Reporter), the default text corpus through
//! [`Assets`](tint_lab::Assets)), and these are the [`RunEvent`]s a run sends it (a note when an
//! experiment starts, a stage per trained variant with its steps as progress, resume notes,
//! learning-curve points and warnings).

use std::path::Path;

use tint_cgt::presets::Variant;
use tint_lab::event::RunEvent;

use super::curve_file::CurvePoint;

/// The note that opens an experiment: preset, steps per variant, batch, seeds, backend, run
/// directory.
pub(crate) fn started(
    preset: &str,
    steps: usize,
    batch_size: usize,
    seeds: &[u64],
    backend: &str,
    run_dir: &Path,
) -> RunEvent {
    RunEvent::Note(format!(
        "cgt preset {preset} | {steps} steps/variant, batch {batch_size} | seeds {seeds:?} \
         | backend {backend} | runs in {}",
        run_dir.display()
    ))
}

/// The events of a variant that starts (or resumes) training at step `resumes_at` of `steps`
/// (0: from scratch; `steps`: finished, evaluated again) in `dir`: its stage,
/// `cgt <variant> seed <seed>`, then a note when it does not start from scratch.
pub(crate) fn variant_started(
    variant: Variant,
    seed: u64,
    steps: usize,
    resumes_at: usize,
    dir: &Path,
) -> Vec<RunEvent> {
    let mut events = vec![RunEvent::Stage(format!(
        "cgt {} seed {seed}",
        variant.slug()
    ))];
    if resumes_at == steps {
        events.push(RunEvent::Note(format!(
            "{} seed {seed}: finished ({steps} steps), evaluating the checkpoint in {}",
            variant.slug(),
            dir.display()
        )));
    } else if resumes_at > 0 {
        events.push(RunEvent::Note(format!(
            "{} seed {seed}: resuming at step {resumes_at} of {steps} from the checkpoint in {}",
            variant.slug(),
            dir.display()
        )));
    }
    events
}

/// Step `step` (0-based) of `steps` finished with these losses.
pub(crate) fn step_done(step: usize, steps: usize, task_loss: f64, total_loss: f64) -> RunEvent {
    RunEvent::Progress {
        done: step + 1,
        total: steps,
        message: format!("loss {task_loss:.3} (total {total_loss:.3})"),
    }
}

/// A learning-curve point was measured (`--eval-every`).
pub(crate) fn curve_point(variant: Variant, seed: u64, point: &CurvePoint) -> RunEvent {
    RunEvent::Note(format!(
        "{} seed {seed} after {} steps: held-out accuracy {:.1} %, no-example {:.1} %, \
         in-context gain {:.1} points",
        variant.slug(),
        point.step,
        100.0 * point.dynamic_accuracy,
        100.0 * point.no_example_accuracy,
        100.0 * point.gain()
    ))
}

/// A variant finished training with `logged_steps` of its `steps` in its log: a warning when the
/// log lost some (the loss curve and training time then cover fewer steps).
pub(crate) fn variant_trained(
    variant: Variant,
    logged_steps: usize,
    steps: usize,
) -> Option<RunEvent> {
    (logged_steps != steps).then(|| {
        RunEvent::Note(format!(
            "{}: warning: the log holds {logged_steps} of {steps} steps; the loss curve and \
             training time cover those",
            variant.slug()
        ))
    })
}
