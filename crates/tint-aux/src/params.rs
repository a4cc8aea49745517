//! Named parameters: every trainable tensor of a model with its layer and group, and a visitor that can
//! read or replace them (used by dynamic evaluation to select what trains, and by the simulator to read
//! weights by name).

use std::fmt;
use std::str::FromStr;

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{backend::Backend, Tensor};

use crate::layer_norm::LayerNorm;
use crate::AuxError;

/// What a parameter does; dynamic evaluation trains named groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamGroup {
    /// Token and position embeddings (the tied LM head), OPT `project_in`/`project_out`. Name: `embed`.
    Embedding,
    /// LayerNorm gains and biases, including the final one. Name: `ln`.
    LayerNorm,
    /// Attention query projection. Name: `attn_q`.
    AttnQuery,
    /// Attention key projection. Name: `attn_k`.
    AttnKey,
    /// Attention value projection. Name: `attn_v`.
    AttnValue,
    /// Attention output projection. Name: `attn_o`.
    AttnOutput,
    /// MLP `fc` and `proj`. Name: `mlp`.
    Mlp,
}

impl ParamGroup {
    /// Every group.
    pub const ALL: [ParamGroup; 7] = [
        ParamGroup::Embedding,
        ParamGroup::LayerNorm,
        ParamGroup::AttnQuery,
        ParamGroup::AttnKey,
        ParamGroup::AttnValue,
        ParamGroup::AttnOutput,
        ParamGroup::Mlp,
    ];

    /// The short name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            ParamGroup::Embedding => "embed",
            ParamGroup::LayerNorm => "ln",
            ParamGroup::AttnQuery => "attn_q",
            ParamGroup::AttnKey => "attn_k",
            ParamGroup::AttnValue => "attn_v",
            ParamGroup::AttnOutput => "attn_o",
            ParamGroup::Mlp => "mlp",
        }
    }

    /// Parses a group name; `attn` expands to the four attention groups.
    pub fn parse_many(name: &str) -> Result<Vec<ParamGroup>, AuxError> {
        if name == "attn" {
            return Ok(vec![
                ParamGroup::AttnQuery,
                ParamGroup::AttnKey,
                ParamGroup::AttnValue,
                ParamGroup::AttnOutput,
            ]);
        }
        Ok(vec![name.parse()?])
    }
}

impl fmt::Display for ParamGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ParamGroup {
    type Err = AuxError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ParamGroup::ALL
            .into_iter()
            .find(|g| g.name() == name)
            .ok_or_else(|| AuxError::InvalidOption {
                reason: format!(
                    "unknown parameter group {name:?} (known: embed, ln, attn_q, attn_k, attn_v, attn_o, attn, mlp)"
                ),
            })
    }
}

/// Where a parameter sits in the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    /// Dotted path in our module tree, e.g. `blocks.1.attn.value.weight`.
    pub name: String,
    /// Block index for per-block parameters; `None` for embeddings and the final LayerNorm.
    pub layer: Option<usize>,
    /// What the parameter does.
    pub group: ParamGroup,
}

/// Visits (and may replace) every named parameter of a model.
pub trait ParamMapper<B: Backend> {
    /// Called once per parameter; returns the parameter to keep.
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>>;
}

/// Maps a linear layer's `weight` and `bias` under `prefix`.
pub(crate) fn map_linear<B: Backend, M: ParamMapper<B>>(
    linear: Linear<B>,
    prefix: &str,
    layer: Option<usize>,
    group: ParamGroup,
    mapper: &mut M,
) -> Linear<B> {
    let info = |leaf: &str| ParamInfo {
        name: format!("{prefix}.{leaf}"),
        layer,
        group,
    };
    Linear {
        weight: mapper.map(&info("weight"), linear.weight),
        bias: linear.bias.map(|b| mapper.map(&info("bias"), b)),
    }
}

/// Maps a LayerNorm's `gamma` and `beta` under `prefix`.
pub(crate) fn map_layer_norm<B: Backend, M: ParamMapper<B>>(
    norm: LayerNorm<B>,
    prefix: &str,
    layer: Option<usize>,
    mapper: &mut M,
) -> LayerNorm<B> {
    let info = |leaf: &str| ParamInfo {
        name: format!("{prefix}.{leaf}"),
        layer,
        group: ParamGroup::LayerNorm,
    };
    LayerNorm {
        gamma: mapper.map(&info("gamma"), norm.gamma),
        beta: mapper.map(&info("beta"), norm.beta),
        epsilon: norm.epsilon,
    }
}
