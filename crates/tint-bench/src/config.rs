//! The benchmark's model sizes (the tiny GPT-2 of issue #9 and a micro one), the TinT and LLaMA
//! step settings it times, and the shapes (B, T, simulated layers) of the scaling table.

use serde::Serialize;
use tint_sim::config::MAX_POSITION_EMBEDDINGS;
use tint_sim::llama::{LlamaSimulatorConfig, LlamaTintConfig};
use tint_sim::StepConfig;
use tint_sim::{AuxDims, Execution, TintConfig};

/// Inner learning rate of the timed step (any finite value times the same work).
pub const INNER_LR: f64 = 1e-3;

/// Sequence length of the SmolLM2 measurements.
pub const SMOLLM2_SEQ_LENGTH: usize = 256;

/// Sizes of a benchmark configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BenchConfig {
    /// Name in the report (`tiny`, `micro`).
    pub name: &'static str,
    /// `D`.
    pub d_model: usize,
    /// Auxiliary layers (all simulated).
    pub n_layers: usize,
    /// Auxiliary heads.
    pub n_heads: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// `T` (also `n_positions`).
    pub seq_length: usize,
    /// Training tokens per sequence.
    pub train_length: usize,
    /// TinT prefixes `P`.
    pub n_prefixes: usize,
    /// TinT softmax head size (`Hs = Ds / head_size`).
    pub sim_head_size: usize,
}

impl BenchConfig {
    /// The tiny GPT-2 of issue #9: D = 128, 4 layers, 4 heads, vocabulary 4096, T = 256 (128 train);
    /// TinT Ds = 640, P = 32, Hs = 20.
    pub const TINY: Self = Self {
        name: "tiny",
        d_model: 128,
        n_layers: 4,
        n_heads: 4,
        vocab_size: 4096,
        seq_length: 256,
        train_length: 128,
        n_prefixes: 32,
        sim_head_size: 32,
    };
    /// A micro GPT-2 for smoke tests: D = 32, 2 layers, T = 64; Ds = 160, P = 8, Hs = 20.
    pub const MICRO: Self = Self {
        name: "micro",
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        vocab_size: 512,
        seq_length: 64,
        train_length: 32,
        n_prefixes: 8,
        sim_head_size: 8,
    };

    /// The micro config for a smoke run (`quick`), else the tiny one.
    pub fn for_quick(quick: bool) -> Self {
        if quick {
            Self::MICRO
        } else {
            Self::TINY
        }
    }

    /// The named configuration itself ([`Self::TINY`] or [`Self::MICRO`]), whatever its positions.
    pub fn base(&self) -> Self {
        Self::for_quick(self.name == Self::MICRO.name)
    }

    /// The same model with `n_positions` positions (`T` = `n_positions`, the first half training):
    /// the checkpoint of the scaling table's `T` sweep ([`LONG_CONTEXT_FACTOR`] × the config's `T`).
    /// Only the position table grows; the construction's `Tmax` is the model's, so its position
    /// terms grow with it.
    pub fn with_positions(&self, n_positions: usize) -> Self {
        Self {
            seq_length: n_positions,
            train_length: n_positions / 2,
            ..*self
        }
    }

    /// The auxiliary model's sizes (GPT-2: MLP inner size `4 D`).
    pub fn aux_dims(&self) -> AuxDims {
        AuxDims {
            d_model: self.d_model,
            n_heads: self.n_heads,
            n_layers: self.n_layers,
            d_inner: 4 * self.d_model,
            vocab_size: self.vocab_size,
            n_positions: self.seq_length,
        }
    }

    /// The TinT configuration of the step (one step, reuse on), in `execution`, with the top
    /// `sim_layers` layers simulated (`None`: all).
    pub fn tint_config(&self, execution: Execution, sim_layers: Option<usize>) -> TintConfig {
        TintConfig {
            step: StepConfig {
                inner_lr: INNER_LR,
                n_simulation_layers: sim_layers,
                ..StepConfig::default()
            },
            restrict_prefixes: true,
            reuse_forward_blocks: true,
            reuse_backward_blocks: true,
            execution,
            ..TintConfig::for_model(self.d_model, self.n_prefixes, self.sim_head_size)
        }
    }
}

/// The LLaMA step of the SmolLM2 simulator and reference rows: top `layers` layers, one step.
pub fn smollm2_step_config(layers: usize) -> LlamaTintConfig {
    LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(layers),
            inner_lr: INNER_LR,
            ..StepConfig::default()
        },
        ..Default::default()
    }
}

/// The SmolLM2 simulator's sizes: the README setting of [`LlamaSimulatorConfig::for_model`] (the
/// same `Ds`, `P`, `Hs` as `Tint::simulator`: the one rule, `TintConfig::sized_for`), `Tmax` from the model.
pub fn smollm2_sim_config(
    d_model: usize,
    n_heads: usize,
    step: LlamaTintConfig,
) -> LlamaSimulatorConfig {
    LlamaSimulatorConfig::for_model(d_model, n_heads, step)
}

/// Sequence length and simulated layers of one child measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildShape {
    /// Tokens per sequence (the first half trains).
    pub seq_length: usize,
    /// Simulated top layers (`None`: all).
    pub sim_layers: Option<usize>,
}

/// How many times the config's `T` the checkpoint of the scaling table's `T` sweep has positions
/// (tiny: 2048).
pub const LONG_CONTEXT_FACTOR: usize = 8;

/// Batch sizes of the scaling table's `B` sweep.
pub const SCALING_BATCH_SIZES: [usize; 5] = [1, 2, 4, 8, 16];

/// One point of the scaling table: a batch size, a shape, and the positions of the checkpoint it
/// runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalingPoint {
    /// Sequences per call.
    pub batch_size: usize,
    /// Sequence length and simulated layers.
    pub shape: ChildShape,
    /// The checkpoint's `n_positions` (the construction's `Tmax`).
    pub positions: usize,
}

impl ScalingPoint {
    /// `batch_size` sequences of `seq_length` tokens, `sim_layers` simulated top layers (`None`:
    /// all), on a checkpoint of `positions` positions.
    pub fn new(
        batch_size: usize,
        seq_length: usize,
        sim_layers: Option<usize>,
        positions: usize,
    ) -> Self {
        Self {
            batch_size,
            shape: ChildShape {
                seq_length,
                sim_layers,
            },
            positions,
        }
    }
}

/// The positions of the checkpoint of the scaling table's `T` sweep: [`LONG_CONTEXT_FACTOR`] × T,
/// cut to the construction's limit `P + Tmax ≤` [`MAX_POSITION_EMBEDDINGS`] (tiny: 2016, micro 512).
pub fn long_context_positions(config: &BenchConfig) -> usize {
    (LONG_CONTEXT_FACTOR * config.seq_length).min(MAX_POSITION_EMBEDDINGS - config.n_prefixes)
}

/// The points of the scaling table: B = 1, 2, 4, 8, 16 at the config's `T` with every layer, and 1,
/// 2 simulated top layers at B = 1, on the config's checkpoint; `T` = T/2, T, 2T, 4T and the longest
/// at B = 1 on the checkpoint of [`long_context_positions`].
pub fn scaling_points(config: &BenchConfig) -> Vec<ScalingPoint> {
    let t = config.seq_length;
    let point = ScalingPoint::new;
    let mut points: Vec<ScalingPoint> = SCALING_BATCH_SIZES
        .iter()
        .map(|&b| point(b, t, None, t))
        .collect();
    for layers in [1, 2] {
        if layers < config.n_layers {
            points.push(point(1, t, Some(layers), t));
        }
    }
    let long = long_context_positions(config);
    for length in [t / 2, t, 2 * t, 4 * t, long] {
        points.push(point(1, length, None, long));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_points_cover_batch_length_and_layers() {
        let points = scaling_points(&BenchConfig::TINY);
        let point = ScalingPoint::new;
        assert_eq!(
            &points[..5],
            &[1, 2, 4, 8, 16].map(|b| point(b, 256, None, 256))
        );
        assert!(points.contains(&point(1, 256, Some(2), 256)));
        // The T sweep runs on the 2016-position checkpoint (P + Tmax ≤ 2048), T = 256 included.
        for t in [128, 256, 512, 1024, 2016] {
            assert!(points.contains(&point(1, t, None, 2016)), "T = {t}");
        }
        assert_eq!(points.len(), 12);
        // The micro config has 2 layers: "2 simulated layers" is the full row, not repeated.
        assert_eq!(scaling_points(&BenchConfig::MICRO).len(), 11);
        let long = BenchConfig::TINY.with_positions(2048);
        assert_eq!((long.seq_length, long.train_length), (2048, 1024));
        assert_eq!(long.base(), BenchConfig::TINY);
    }

    #[test]
    fn aux_dims_are_gpt2_sizes() {
        let dims = BenchConfig::TINY.aux_dims();
        assert_eq!((dims.d_model, dims.d_inner, dims.n_layers), (128, 512, 4));
        assert_eq!(BenchConfig::for_quick(true), BenchConfig::MICRO);
    }
}
