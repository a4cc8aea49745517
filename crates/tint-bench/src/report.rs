//! The markdown sections of docs/performance.md: the measurements of one configuration with
//! their ratios to the authors' figures and issue 17's goals, the scaling table, and the SmolLM2
//! section, each with its FLOP count and the command that reproduces it.

use tint_sim::flops::{llama_dyn_eval_flops, LlamaStepFlops, StepFlops};
use tint_sim::llama::param_count::LlamaSizes;
use tint_sim::Execution;

use tint_lab::table::Table;

use super::checkpoint::checkpoint_dir;
use super::config::{
    smollm2_sim_config, smollm2_step_config, BenchConfig, INNER_LR, SMOLLM2_SEQ_LENGTH,
};
use super::goals::*;
use super::machine::ReportContext;
use super::measure::{median, min, Measurement};
use super::mode::{mode_flops, mode_label, smollm2_label, smollm2_mode_flops};

/// The SmolLM2 report section. `sgemm_gflops`: the machine's measured sgemm rate, when this run
/// measured it.
pub fn render_smollm2(
    measurements: &[Measurement],
    layers: usize,
    repeat: usize,
    sgemm_gflops: Option<f64>,
    ctx: &ReportContext,
) -> String {
    let mut out = smollm2_intro(layers, repeat, ctx);
    out.push_str(&smollm2_table(measurements, layers));
    out.push_str(&smollm2_ratios(measurements, layers, sgemm_gflops));
    out.push_str(&smollm2_flop_count(layers));
    out
}

/// The section's heading, what is measured, the machine, build and GPU, and how each row is timed.
fn smollm2_intro(layers: usize, repeat: usize, ctx: &ReportContext) -> String {
    let backend = &ctx.backend;
    let sizes = LlamaSizes::smollm2_135m();
    let sim = smollm2_sim_config(sizes.d_model, sizes.n_heads, smollm2_step_config(layers));
    let train = SMOLLM2_SEQ_LENGTH / 2;
    let mut out = format!(
        "## SmolLM2-135M-Instruct, `{backend}` backend (measured {})\n\n\
         LLaMA (D = {}, {} layers, {} query / {} KV heads of {}, SwiGLU Di = {}, vocabulary {}, tied \
         head), Q4_1 GGUF dequantised to f32; T = {SMOLLM2_SEQ_LENGTH} ({train} training tokens), \
         deterministic token ids; the top {layers} layers updated, one step. Rows: the LLaMA simulator \
         (Ds = {}, P = {}, Hs = {}, the README sizes of `Tint::simulator`) in its constructed \
         execution (the default) and, where measured, its structured one (which runs the {} \
         blocks below the updated ones as plain blocks on the `D` token columns, with the weights \
         read from their prefix rows, docs/construction.md §15), the LLaMA \
         functional reference (docs/construction.md §9 on LLaMA, finite differences), dynamic evaluation (one \
         SGD step with burn autodiff on the training tokens, the top {layers} layers and the final \
         norm trained, then the forward on the whole sequence) and a plain forward.\n\n",
        ctx.date,
        sizes.d_model,
        sizes.n_layers,
        sizes.n_heads,
        sizes.n_kv_heads,
        sizes.head_dim,
        sizes.d_ff,
        sizes.vocab_size,
        sim.hidden_size,
        sim.num_prefixes,
        sim.num_heads,
        sizes.n_layers.saturating_sub(layers),
    );
    out.push_str(&format!("* Machine: {}.\n", ctx.machine));
    out.push_str(&format!("* Build: {}.\n", ctx.build));
    if let Some(gpu) = &ctx.gpu {
        out.push_str(&format!("* GPU: {gpu} (`nvidia-smi`).\n"));
    }
    out.push_str(&format!(
        "* Each row: one warm-up run, then {repeat} timed runs in a fresh child process; `min` and \
         `median` wall seconds, the smallest user+system CPU seconds of a run, and the child's peak \
         RSS (`VmHWM`, including loading, dequantising and construction).\n\n"
    ));
    out
}

/// The columns of a measurement table (the configuration's and SmolLM2's).
const MEASUREMENT_COLUMNS: [&str; 9] = [
    "measurement",
    "B",
    "min s",
    "median s",
    "cpu s",
    "tokens/s",
    "GFLOP",
    "GFLOP/s",
    "peak RSS MB",
];

/// The peak RSS cell of `m` in MB, with the GPU's memory where it was read.
fn memory_cell(m: &Measurement) -> String {
    let gpu_memory = m
        .gpu_memory_mb
        .map(|mb| format!(" (GPU {mb} MiB)"))
        .unwrap_or_default();
    format!("{:.0}{gpu_memory}", m.peak_rss_kb as f64 / 1024.0)
}

/// The measurement table: one row per mode and batch size.
fn smollm2_table(measurements: &[Measurement], layers: usize) -> String {
    let mut table = Table::new(MEASUREMENT_COLUMNS);
    for m in measurements {
        let best = min(&m.seconds);
        let flops = smollm2_mode_flops(&m.mode, m.batch_size, layers);
        table.push_row([
            smollm2_label(&m.mode).to_string(),
            m.batch_size.to_string(),
            format!("{best:.3}"),
            format!("{:.3}", median(&m.seconds)),
            format!("{:.2}", min(&m.cpu_seconds)),
            format!("{:.0}", (m.batch_size * SMOLLM2_SEQ_LENGTH) as f64 / best),
            format!("{:.2}", flops / 1e9),
            format!("{:.2}", flops / best / 1e9),
            memory_cell(m),
        ]);
    }
    table.to_markdown()
}

/// The ratios of the simulator's executions to the reference, dynamic evaluation and a plain
/// forward (with issue 17's goals), its peak memory and its share of the sgemm rate.
fn smollm2_ratios(
    measurements: &[Measurement],
    layers: usize,
    sgemm_gflops: Option<f64>,
) -> String {
    let mut out = String::new();
    out.push_str("\n### Ratios\n\n");
    let find = |mode: &str, b: usize| {
        measurements
            .iter()
            .find(|m| m.mode == mode && m.batch_size == b)
    };
    for m in measurements.iter().filter(|m| m.mode == "smollm2-sim") {
        let (best, b) = (min(&m.seconds), m.batch_size);
        for (other, what) in [
            ("smollm2-ref", "our LLaMA functional reference"),
            ("smollm2-dyn", "dynamic evaluation"),
            ("smollm2-aux", "a plain forward"),
        ] {
            if let Some(o) = find(other, b) {
                out.push_str(&format!(
                    "* Simulator / {what}, B = {b}: {:.2}×{}.\n",
                    best / min(&o.seconds),
                    if other == "smollm2-ref" {
                        format!(
                            " (issue 65's goal for the constructed execution, ≤ \
                             {GOAL_SMOLLM2_SIM_OVER_REF}×: {})",
                            verdict(best / min(&o.seconds), GOAL_SMOLLM2_SIM_OVER_REF)
                        )
                    } else {
                        String::new()
                    },
                ));
            }
        }
        let rss_mb = m.peak_rss_kb as f64 / 1024.0;
        out.push_str(&format!("* Simulator peak RSS, B = {b}: {rss_mb:.0} MB"));
        if let Some(r) = find("smollm2-ref", b) {
            out.push_str(&format!(
                " ({:.2}× the reference's {:.0} MB)",
                m.peak_rss_kb as f64 / r.peak_rss_kb.max(1) as f64,
                r.peak_rss_kb as f64 / 1024.0
            ));
        }
        out.push_str(".\n");
        if let Some(bound) = sgemm_gflops {
            let rate = smollm2_mode_flops(&m.mode, b, layers) / best / 1e9;
            out.push_str(&format!(
                "* Simulator, B = {b}: {rate:.2} model GFLOP/s = {:.1}% of the sgemm rate ({bound:.1} GFLOP/s, this run).\n",
                100.0 * rate / bound
            ));
        }
    }
    for m in measurements
        .iter()
        .filter(|m| m.mode == "smollm2-structured")
    {
        let (best, b) = (min(&m.seconds), m.batch_size);
        if let Some(r) = find("smollm2-ref", b) {
            let ratio = best / min(&r.seconds);
            out.push_str(&format!(
                "* Structured simulator / our LLaMA functional reference, B = {b}: {ratio:.2}× \
                 (issue 65's goal for the structured execution, ≤ {GOAL_SMOLLM2_STRUCTURED_OVER_REF}×: {}).\n",
                verdict(ratio, GOAL_SMOLLM2_STRUCTURED_OVER_REF)
            ));
        }
        if let Some(c) = find("smollm2-sim", b) {
            out.push_str(&format!(
                "* Constructed / structured simulator, B = {b}: {:.2}×.\n",
                min(&c.seconds) / best
            ));
        }
    }
    out
}

/// How the model FLOPs of each row are counted, and the command that reproduces the section.
fn smollm2_flop_count(layers: usize) -> String {
    let sizes = LlamaSizes::smollm2_135m();
    let train = SMOLLM2_SEQ_LENGTH / 2;
    let mut out = String::new();
    let step = LlamaStepFlops::new(&sizes, SMOLLM2_SEQ_LENGTH, layers);
    out.push_str(&format!(
        "\n### FLOP count\n\n\
         Model FLOPs (2 per multiply-add), counted analytically (`crates/tint-sim/src/flops.rs`, \
         `LlamaStepFlops`), with `Dkv = n_kv · head_dim = {}` (GQA) and `Di = {}`: per layer and \
         sequence the projections `2T(2D² + 2D·Dkv + 3D·Di)` (Q, O; K, V; SwiGLU gate, up, down) and \
         attention `4T²D` (full `T x T`); the tied head `2TDV`. Forward = all {} layers + head \
         ({:.2} GFLOP per sequence). A TinT step = forward + loss gradient `2TDV` + backward of \
         the {layers} updated layers (input gradients `2T(3D·Di + D² + D·Dkv)` of down, gate, up, \
         O, V, as much again for their weight gradients, `2T²D` value-only attention backward) + \
         the final forward of the updated layers and the head (the layers below are unchanged and \
         not recomputed) = {:.2} GFLOP per sequence; the simulator and the reference are both \
         charged this count (the simulator's wider network does more arithmetic: its GFLOP/s is \
         model FLOPs per second). Dynamic evaluation: a forward on the {train} training tokens, \
         its backward (head input gradient, ≈ 2 forwards per trained layer), and a forward on all \
         tokens = {:.2} GFLOP per sequence. RMSNorm, rotary, gating and softmax work is not \
         counted.\n\n",
        sizes.n_kv_heads * sizes.head_dim,
        sizes.d_ff,
        sizes.n_layers,
        step.forward() / 1e9,
        step.tint_step() / 1e9,
        llama_dyn_eval_flops(&sizes, SMOLLM2_SEQ_LENGTH, layers) / 1e9,
    ));
    out.push_str(&format!(
        "Reproduce: `cargo xtask fetch smollm2`, then `cargo xtask bench --smollm2-only \
         --smollm2-layers {layers}` (this section only; `--smollm2` also rewrites the tiny \
         section).\n"
    ));
    out
}

/// The start of a fresh report file (the measured sections are appended after it).
pub const REPORT_HEADER: &str =
    "# Performance\n\nWritten by `cargo xtask bench` (sections between `bench-*` markers are \
regenerated; the rest is kept).\n";

/// The ratio lines of one configuration: each execution against our reference and its share of
/// the sgemm rate; on a GPU backend (`on_cpu` false) with issue 65's GPU goals (the tiny config's
/// constructed step at B = 1, the structured execution against our reference on the same device).
/// Ratios against the authors' code are left to the side-by-side script, which the section names.
pub fn render_ratios(
    config: &BenchConfig,
    measurements: &[Measurement],
    sgemm_size: usize,
    on_cpu: bool,
) -> String {
    let mut out = String::new();
    let tiny = config.name == BenchConfig::TINY.name;
    let find = |mode: &str, b: usize| {
        measurements
            .iter()
            .find(|m| m.mode == mode && m.batch_size == b)
            .map(|m| min(&m.seconds))
    };
    let sgemm = measurements
        .iter()
        .find(|m| m.mode == "sgemm")
        .map(|m| mode_flops(config, "sgemm", 1, sgemm_size) / min(&m.seconds) / 1e9);
    for m in measurements {
        let best = min(&m.seconds);
        let b = m.batch_size;
        let mode = m.mode.as_str();
        if !matches!(mode, "structured" | "constructed") {
            continue;
        }
        if !on_cpu && mode == "constructed" && b == 1 && tiny {
            out.push_str(&format!(
                "* constructed, B = 1: {best:.3} s (issue 65's GPU goal ≤ \
                 {GOAL_GPU_CONSTRUCTED_SECONDS} s: {}).\n",
                verdict(best, GOAL_GPU_CONSTRUCTED_SECONDS)
            ));
        }
        if let Some(r) = find("ref", b) {
            let goal = if on_cpu || mode != "structured" {
                String::new()
            } else {
                format!(
                    " (issue 65's GPU goal ≤ {GOAL_GPU_STRUCTURED_OVER_REF}×: {})",
                    verdict(best / r, GOAL_GPU_STRUCTURED_OVER_REF)
                )
            };
            out.push_str(&format!(
                "* {mode} / our functional reference, B = {b}: {:.2}×{goal}.\n",
                best / r
            ));
        }
        if let Some(bound) = sgemm {
            let rate = mode_flops(config, mode, b, sgemm_size) / best / 1e9;
            out.push_str(&format!(
                "* {mode}, B = {b}: {rate:.2} model GFLOP/s = {:.1}% of the sgemm rate.\n",
                100.0 * rate / bound
            ));
        }
    }
    if let (Some(c), Some(s)) = (find("constructed", 1), find("structured", 1)) {
        out.push_str(&format!(
            "* constructed / structured, B = 1: {:.2}×.\n",
            c / s
        ));
    }
    out.push_str(&format!(
        "\nRatios against the authors' code are not measured by this benchmark: they come from \
         {SIDE_BY_SIDE}.\n"
    ));
    out
}

/// The report section for one configuration.
pub fn render_report(
    config: &BenchConfig,
    measurements: &[Measurement],
    repeat: usize,
    ctx: &ReportContext,
) -> String {
    let backend = &ctx.backend;
    let mut out = String::new();
    let step = StepFlops::new(&config.aux_dims(), config.seq_length);
    let tint = config.tint_config(Execution::Structured, None);
    out.push_str(&format!(
        "## `{}` config, `{backend}` backend (measured {})\n\n",
        config.name, ctx.date
    ));
    out.push_str(&format!(
        "GPT-2, D = {}, {} layers, {} heads, vocabulary {}, T = {} ({} training tokens); TinT Ds = {}, \
         P = {}, Hs = {}, all layers simulated, one step, reuse on, restricted prefixes, exact \
         gates, f32, `{backend}` backend. Seeded random weights (the same every run). \
         Executions: `constructed` evaluates every module from its own stored weights; \
         `structured` is the shortcut proven equal to it (the linear modules read `W, b` out of \
         their prefix rows into one matmul, the norm and activation backward apply their finite \
         difference directly, gates are 0/1 row selections).\n\n",
        config.d_model,
        config.n_layers,
        config.n_heads,
        config.vocab_size,
        config.seq_length,
        config.train_length,
        tint.hidden_size,
        tint.num_prefixes,
        tint.num_heads,
    ));
    out.push_str(&format!("* Machine: {}.\n", ctx.machine));
    out.push_str(&format!("* Build: {}.\n", ctx.build));
    match &ctx.gpu {
        Some(gpu) => out.push_str(&format!(
            "* GPU: {gpu} (`nvidia-smi`); times include reading the loss back to the host, \
             which waits for the device.\n"
        )),
        _ => out.push_str(
            "* CPU run (`flex`, with burn-flex's `rayon` and `simd` features); GPU figures, where \
             measured, are in the `cuda`/`wgpu` sections.\n",
        ),
    }
    out.push_str(&format!(
        "* Each row: one warm-up run, then {repeat} timed runs in a fresh child process; `min` and \
         `median` wall seconds, the smallest user+system CPU seconds of a run, and the child's peak \
         RSS (`VmHWM`, including loading and construction).\n\n"
    ));
    let mut table = Table::new(MEASUREMENT_COLUMNS);
    for m in measurements {
        let best = min(&m.seconds);
        let flops = mode_flops(config, &m.mode, m.batch_size, ctx.sgemm_size);
        let tokens = if m.mode == "sgemm" {
            "–".to_string()
        } else {
            format!("{:.0}", (m.batch_size * config.seq_length) as f64 / best)
        };
        table.push_row([
            mode_label(&m.mode, ctx.sgemm_size),
            m.batch_size.to_string(),
            format!("{best:.4}"),
            format!("{:.4}", median(&m.seconds)),
            format!("{:.2}", min(&m.cpu_seconds)),
            tokens,
            format!("{:.3}", flops / 1e9),
            format!("{:.2}", flops / best / 1e9),
            memory_cell(m),
        ]);
    }
    out.push_str(&table.to_markdown());
    out.push_str("\n### Ratios\n\n");
    out.push_str(&render_ratios(
        config,
        measurements,
        ctx.sgemm_size,
        ctx.backend == "flex",
    ));
    out.push_str(&format!(
        "\n### FLOP count\n\n\
         Model FLOPs (2 per multiply-add) of the auxiliary math, counted analytically \
         (`crates/tint-sim/src/flops.rs`, `StepFlops`): per layer and sequence the projections \
         `2T(4D² + 2D·Di)` and attention `4T²D` (full `T x T`), plus the LM head `2TDV`, make one \
         forward; the loss gradient adds `2TDV` (`softmax · E` over the forward's logits); the backward adds \
         `2T(2D·Di + 2D²)` input gradients, as much again for the four updated weight matrices, and \
         `2T²D` for the value-only attention backward per layer. A TinT step = 2 forwards + loss \
         gradient + backward = {:.3} GFLOP per sequence here; both executions and the reference are \
         charged this count (the constructed network does more arithmetic, so its GFLOP/s is model \
         FLOPs per second, not hardware FLOPs). Dynamic evaluation: 3 forwards on the training \
         tokens (forward + backward) plus one forward on all tokens. LayerNorm, activation and \
         softmax work is not counted.\n\n",
        step.tint_step() / 1e9
    ));
    let dir = checkpoint_dir(config);
    out.push_str(&format!(
        "### Reproduce\n\n\
         ```sh\n\
         cargo xtask bench                 # tiny config (this file's `bench-tiny` section)\n\
         cargo xtask bench --scaling       # also the `bench-tiny-scaling` section (B, T, layers)\n\
         cargo xtask bench --quick         # micro config (`bench-micro` section)\n\
         # one measurement by hand, on the checkpoint and ids the bench wrote:\n\
         cargo xtask logits --model {dir} --ids {dir}/ids.json --out /tmp/tint-logits.safetensors \\\n  \
         --tint --execution structured --tint-prefixes {} --tint-heads {} --inner-lr {INNER_LR} \\\n  \
         --timing --repeat 5\n\
         ```\n\n\
         `--timing` prints one `step_seconds <value>` line per timed step (loading and construction \
         excluded); `--execution constructed` times the other execution; `ids.json` holds one \
         sequence (`input_ids`, and `train_mask` = 1 on the first {} tokens).\n",
        tint.num_prefixes,
        tint.num_heads,
        config.train_length,
        dir = dir.display(),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(backend: &str) -> ReportContext {
        ReportContext {
            backend: backend.into(),
            machine: "test machine".into(),
            build: "test build".into(),
            gpu: None,
            date: "2026-11-25 10:00 UTC".into(),
            sgemm_size: 1024,
        }
    }

    fn measurement(mode: &str, b: usize, s: f64) -> Measurement {
        Measurement {
            mode: mode.into(),
            batch_size: b,
            seq_length: 256,
            sim_layers: None,
            positions: 256,
            seconds: vec![s * 1.1, s, s * 1.2],
            cpu_seconds: vec![s],
            peak_rss_kb: 512 * 1024,
            gpu_memory_mb: None,
        }
    }

    #[test]
    fn report_has_rows_ratios_and_reproduction() {
        let ctx = context("flex");
        let report = render_report(
            &BenchConfig::TINY,
            &[
                measurement("structured", 1, 0.1),
                measurement("constructed", 1, 0.5),
                measurement("ref", 1, 0.25),
                measurement("aux", 1, 0.04),
                measurement("sgemm", 1, 0.1),
            ],
            3,
            &ctx,
        );
        assert!(report.contains("| TinT step, constructed execution | 1 | 0.5000 | 0.5500 |"));
        // No stored time of the authors': the ratios to their code come from the side-by-side
        // script, which the section names.
        assert!(!report.contains("the official"), "{report}");
        assert!(
            report.contains("scripts/official_side_by_side.sh") && report.contains("≥ 10×"),
            "{report}"
        );
        assert!(report.contains("constructed / our functional reference, B = 1: 2.00×."));
        assert!(report.contains("constructed / structured, B = 1: 5.00×."));
        assert!(report.contains("CPU run (`flex`"), "{report}");
        assert!(report.contains("* Machine: test machine.\n* Build: test build."));
        assert!(report.contains("measured 2026-11-25 10:00 UTC"));
        assert_eq!(ctx.section_key("tiny"), "bench-tiny");
        assert_eq!(context("cuda").section_key("tiny"), "bench-tiny-cuda");
        assert!(report.contains("--timing --repeat"));
        assert!(report.contains("--execution structured"));
        assert!(report.contains("ids.json"));
        assert!(report.contains("sgemm 1024³ (bound)"));
        // 256 tokens in 0.5 s.
        assert!(report.contains("| 512 |"));
        // A GPU run of the tiny config gets issue 65's GPU goals: the constructed step at B = 1
        // (0.12 s > 0.05 s: not met) and the structured execution against the reference
        // (0.1 / 0.04 = 2.5× > 2: not met); the micro config no constructed-step goal.
        let gpu_run = [
            measurement("structured", 1, 0.1),
            measurement("constructed", 1, 0.12),
            measurement("ref", 1, 0.04),
        ];
        let gpu = render_ratios(&BenchConfig::TINY, &gpu_run, 1024, false);
        assert!(
            gpu.contains("* constructed, B = 1: 0.120 s (issue 65's GPU goal ≤ 0.05 s: not met)."),
            "{gpu}"
        );
        assert!(
            gpu.contains("structured / our functional reference, B = 1: 2.50× (issue 65's GPU goal ≤ 2×: not met)"),
            "{gpu}"
        );
        assert!(
            gpu.contains("constructed / our functional reference, B = 1: 3.00×."),
            "{gpu}"
        );
        let micro = render_ratios(&BenchConfig::MICRO, &gpu_run, 1024, false);
        assert!(!micro.contains("0.05 s"), "{micro}");
    }

    #[test]
    fn smollm2_section_has_rows_ratios_and_sizes() {
        let smollm2 = render_smollm2(
            &[
                measurement("smollm2-ref", 1, 4.0),
                measurement("smollm2-sim", 1, 8.0),
                measurement("smollm2-structured", 1, 6.0),
                measurement("smollm2-aux", 4, 0.5),
            ],
            2,
            3,
            Some(10.0),
            &context("flex"),
        );
        // min 4 s, median 4.4 s, 256 tokens / 4 s = 64 tokens/s.
        assert!(
            smollm2.contains("| LLaMA functional reference step | 1 | 4.000 | 4.400 | 4.00 | 64 |"),
            "{smollm2}"
        );
        // 4 × 256 tokens in 0.5 s.
        assert!(smollm2.contains("| forward | 4 | 0.500 | 0.550 | 0.50 | 2048 |"));
        assert!(smollm2.contains("top 2 layers updated"));
        assert!(smollm2.contains(
            "Simulator / our LLaMA functional reference, B = 1: 2.00× (issue 65's goal for the \
             constructed execution, ≤ 2×: met)"
        ));
        assert!(
            smollm2.contains("Simulator peak RSS, B = 1: 512 MB (1.00× the reference's 512 MB)")
        );
        assert!(smollm2.contains(
            "| LLaMA simulator step, structured execution | 1 | 6.000 | 6.600 | 6.00 | 43 |"
        ));
        assert!(smollm2.contains(
            "Structured simulator / our LLaMA functional reference, B = 1: 1.50× (issue 65's goal \
             for the structured execution, ≤ 1.2×: not met)"
        ));
        assert!(smollm2.contains("Constructed / structured simulator, B = 1: 1.33×."));
        assert!(smollm2.contains("% of the sgemm rate (10.0 GFLOP/s, this run)"));
        assert!(smollm2.contains("Ds = 2880, P = 144, Hs = 45"), "{smollm2}");
        assert!(smollm2.contains("--smollm2-only"));
    }
}
