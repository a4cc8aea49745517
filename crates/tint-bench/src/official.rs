//! The authors' figures the benchmark compares with, and the goals of issue 17.
//!
//! Source: the authors' PyTorch TinT (torch 2.3.1, 2 threads, `torch.no_grad`) on a trained tiny
//! GPT-2 (the `tiny` sizes of [`super::BenchConfig::TINY`]), measured side by side with this code
//! on the same idle 2-core CPU machine, 2026-11-23 (issue 17).

/// Where the official figures come from, as the report states it.
pub const OFFICIAL_SOURCE: &str = "the authors' PyTorch TinT (torch 2.3.1, 2 threads, \
     `torch.no_grad`), measured side by side with this code on the same idle 2-core CPU machine, \
     2026-11-23 (issue 17)";
/// The authors' TinT step, seconds (lowest, highest of their runs), by batch size.
pub const OFFICIAL_STEP_SECONDS: [(usize, (f64, f64)); 2] = [(1, (1.39, 1.61)), (2, (2.59, 2.89))];
/// Peak RSS of the authors' whole process, GB, by batch size.
pub const OFFICIAL_PEAK_GB: [(usize, f64); 2] = [(1, 1.12), (2, 1.39)];
/// The authors' plain-tensor version of the same update, one sequence.
pub const OFFICIAL_REF_SECONDS: f64 = 0.18;
/// An HF `transformers` forward of the same model, one sequence.
pub const OFFICIAL_AUX_SECONDS: f64 = 0.02;
/// Goals of issue 17, seconds by batch size: the structured execution (≥ 15× the official step)...
pub const GOAL_STRUCTURED_SECONDS: [(usize, f64); 2] = [(1, 0.09), (2, 0.18)];
/// ... and the constructed execution (≥ 5×).
pub const GOAL_CONSTRUCTED_SECONDS: [(usize, f64); 2] = [(1, 0.28), (2, 0.54)];
/// Goal of issue 17 for the functional reference, B = 1 (faster than PyTorch's 0.18 s).
pub const GOAL_REF_SECONDS: f64 = 0.15;
/// Goal of issue 17 for the auxiliary forward, B = 1 (HF's figure).
pub const GOAL_AUX_SECONDS: f64 = 0.02;
/// Issue 17's goals on a GPU backend: the structured execution against our functional reference
/// on the same device (ratio, at most)...
pub const GOAL_GPU_STRUCTURED_OVER_REF: f64 = 2.0;
/// ... and the constructed execution.
pub const GOAL_GPU_CONSTRUCTED_OVER_REF: f64 = 4.0;
/// Issue 17's goal for the SmolLM2 simulator against the LLaMA reference (ratio, at most).
pub const GOAL_SMOLLM2_SIM_OVER_REF: f64 = 3.0;

/// Issue 17's goal for the SmolLM2 simulator in its structured execution, as a ratio to the LLaMA
/// functional reference (top 2 layers, T = 256, B = 1).
pub const GOAL_SMOLLM2_STRUCTURED_OVER_REF: f64 = 1.3;

/// The value of `batch_size` in a `(batch size, value)` table.
pub fn lookup(table: &[(usize, f64)], batch_size: usize) -> Option<f64> {
    table
        .iter()
        .find(|(b, _)| *b == batch_size)
        .map(|(_, s)| *s)
}

/// `met` / `not met` for a measured value against a goal (smaller is better).
pub fn verdict(value: f64, goal: f64) -> &'static str {
    if value <= goal {
        "met"
    } else {
        "not met"
    }
}
