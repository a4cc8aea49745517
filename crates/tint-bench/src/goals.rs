//! Issue 65's speed goals that one run of the benchmark can check, and where the others are measured.
//!
//! The CPU goals are ratios to the authors' PyTorch TinT, which this benchmark does not run: every
//! such ratio comes from a side-by-side run of both in the same minutes on the same machine
//! ([`SIDE_BY_SIDE`]), never from a stored time of theirs (a stored time does not carry over to
//! another VM: the ratio moved between VMs).

/// Where the ratios against the authors' code are measured, as the report names it.
pub const SIDE_BY_SIDE: &str =
    "`TINT_MIRROR=<authors' repository> scripts/official_side_by_side.sh` \
     (interleaved runs of the authors' step and ours on the same checkpoint; docs/performance.md, \
     \"Side by side with the authors' code, from one script\"); issue 65's CPU goals there: the \
     constructed step ≥ 10× the authors', the structured ≥ 25× at B = 2 and ≥ 15× at B = 1";
/// Issue 65's goal on a GPU backend for the constructed step of the tiny config at B = 1, seconds.
pub const GOAL_GPU_CONSTRUCTED_SECONDS: f64 = 0.05;
/// Issue 65's goal on a GPU backend: the structured execution against our functional reference on
/// the same device (ratio, at most).
pub const GOAL_GPU_STRUCTURED_OVER_REF: f64 = 2.0;
/// Issue 65's goal for the SmolLM2 simulator (constructed execution) against the LLaMA functional
/// reference (ratio, at most).
pub const GOAL_SMOLLM2_SIM_OVER_REF: f64 = 2.0;
/// Issue 65's goal for the SmolLM2 simulator in its structured execution against the LLaMA
/// functional reference (ratio, at most).
pub const GOAL_SMOLLM2_STRUCTURED_OVER_REF: f64 = 1.2;

/// `met` / `not met` for a measured value against a goal (smaller is better).
pub fn verdict(value: f64, goal: f64) -> &'static str {
    if value <= goal {
        "met"
    } else {
        "not met"
    }
}
