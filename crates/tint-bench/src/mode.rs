//! The benchmark's measurements by name (the `MODE` of a child's `MODE:BATCH`), their labels in
//! the report and the model FLOPs each is charged ([`tint_sim::flops`]).

use tint_sim::flops::{dyn_eval_flops, llama_dyn_eval_flops, LlamaStepFlops, StepFlops};
use tint_sim::llama::param_count::LlamaSizes;

use super::config::{BenchConfig, SMOLLM2_SEQ_LENGTH};

/// The tiny/micro measurements (`--modes`).
pub const TINY_MODES: [&str; 6] = ["structured", "constructed", "ref", "dyn", "aux", "sgemm"];

/// The two executions of the simulator, as modes.
pub const EXECUTION_MODES: [&str; 2] = ["structured", "constructed"];

/// The measurements of the scaling table (`--scaling-modes`).
pub const SCALING_MODES: [&str; 3] = ["structured", "constructed", "ref"];

/// The SmolLM2 measurements (`--smollm2-modes`; child modes `smollm2-<mode>`): `sim` is the LLaMA
/// simulator in its constructed execution, `structured` the same simulator in its structured one.
pub const SMOLLM2_MODES: [&str; 5] = ["sim", "structured", "ref", "dyn", "aux"];

/// Side of the square sgemm that measures the machine's matmul rate on the CPU.
pub const SGEMM_SIZE_CPU: usize = 1024;

/// Side of the sgemm on a GPU (a 1024³ product takes microseconds there, so launch and read-back
/// would be measured).
pub const SGEMM_SIZE_GPU: usize = 8192;

/// FLOPs of one measurement of `mode` at `batch_size` (`sgemm_size`: the side of the sgemm).
pub fn mode_flops(config: &BenchConfig, mode: &str, batch_size: usize, sgemm_size: usize) -> f64 {
    let dims = config.aux_dims();
    let per_sequence = match mode {
        "structured" | "constructed" | "ref" => {
            StepFlops::new(&dims, config.seq_length).tint_step()
        }
        "dyn" => dyn_eval_flops(&dims, config.train_length, config.seq_length),
        "aux" => StepFlops::new(&dims, config.seq_length).forward,
        "sgemm" => return 2.0 * (sgemm_size as f64).powi(3),
        _ => 0.0,
    };
    per_sequence * batch_size as f64
}

/// FLOPs of one SmolLM2 measurement (`smollm2-<mode>`) at `batch_size`, top `updated` layers.
pub fn smollm2_mode_flops(mode: &str, batch_size: usize, updated: usize) -> f64 {
    let sizes = LlamaSizes::smollm2_135m();
    let step = LlamaStepFlops::new(&sizes, SMOLLM2_SEQ_LENGTH, updated);
    let per_sequence = match mode {
        "smollm2-sim" | "smollm2-structured" | "smollm2-ref" => step.tint_step(),
        "smollm2-dyn" => llama_dyn_eval_flops(&sizes, SMOLLM2_SEQ_LENGTH, updated),
        "smollm2-aux" => step.forward(),
        _ => 0.0,
    };
    per_sequence * batch_size as f64
}

/// The report's name of a tiny/micro measurement.
pub fn mode_label(mode: &str, sgemm_size: usize) -> String {
    match mode {
        "structured" => "TinT step, structured execution".into(),
        "constructed" => "TinT step, constructed execution".into(),
        "ref" => "functional reference step".into(),
        "dyn" => "dynamic evaluation".into(),
        "aux" => "auxiliary forward".into(),
        "sgemm" => format!("sgemm {sgemm_size}³ (bound)"),
        other => other.into(),
    }
}

/// The report's name of a SmolLM2 measurement.
pub fn smollm2_label(mode: &str) -> &str {
    match mode {
        "smollm2-sim" => "LLaMA simulator step",
        "smollm2-structured" => "LLaMA simulator step, structured execution",
        "smollm2-ref" => "LLaMA functional reference step",
        "smollm2-dyn" => "dynamic evaluation",
        "smollm2-aux" => "forward",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_flops_charge_the_step_count_per_sequence() {
        // Sums of products of small integers: exact in f64 (tolerance 0).
        let config = BenchConfig::MICRO;
        let step = StepFlops::new(&config.aux_dims(), config.seq_length);
        assert_eq!(
            mode_flops(&config, "structured", 2, 1024),
            2.0 * step.tint_step()
        );
        assert_eq!(
            mode_flops(&config, "constructed", 1, 1024),
            step.tint_step()
        );
        assert_eq!(mode_flops(&config, "aux", 3, 1024), 3.0 * step.forward);
        assert_eq!(mode_flops(&config, "sgemm", 1, 4), 128.0);
        assert_eq!(
            smollm2_mode_flops("smollm2-sim", 4, 2),
            4.0 * smollm2_mode_flops("smollm2-ref", 1, 2)
        );
        assert_eq!(mode_label("sgemm", 8192), "sgemm 8192³ (bound)");
    }
}
