//! Model hyper-parameters ([`CgtConfig`]) and the template mixing non-linearity ([`Mixing`]).

use burn::config::Config;
use serde::{Deserialize, Serialize};

use crate::error::CgtError;

/// The non-linearity `h` in the template mixing coefficients `sigma^kappa(y) = h(S^kappa [y; 1])`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mixing {
    /// Element-wise hyperbolic tangent.
    Tanh,
    /// Softmax over the `M` templates.
    Softmax,
}

/// What the model reads at every position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InputKind {
    /// Integer tokens in `[0, vocab_size)`, embedded by a lookup table.
    Tokens,
    /// Real vectors of the given dimension, embedded by a learned linear map (linear-regression task).
    Vectors(usize),
    /// Real vectors of the given dimension, zero-padded to the stream width before the positions are
    /// added: the paper's linear-regression embedding (§4.1, "each x and y vector was zero-padded to the
    /// input embedding size"). The dimension must not exceed `d_x` (nor `d_y` for a CGT).
    PaddedVectors(usize),
}

impl InputKind {
    /// The vector width of a vector input (`None` for tokens).
    pub fn vector_width(self) -> Option<usize> {
        match self {
            Self::Tokens => None,
            Self::Vectors(width) | Self::PaddedVectors(width) => Some(width),
        }
    }
}

/// Hyper-parameters of a Contextually Guided Transformer (or of the plain baseline built from the same code).
///
/// Layers `1..=readout_layer` carry the two streams `x` (width `d_x`) and `y` (width `d_y`);
/// layers `readout_layer+1..=n_layers` carry only `x` and are modulated by `y^l` through
/// low-rank template operators. `readout_layer = 0` gives the plain baseline transformer.
#[derive(Config, Debug)]
pub struct CgtConfig {
    /// Output size: the vocabulary size for token models, the regression output size for vector models.
    pub output_size: usize,
    /// Maximum sequence length (size of the learned position table).
    pub max_seq_len: usize,
    /// Total number of transformer layers `L`.
    pub n_layers: usize,
    /// Width of the `x` stream.
    pub d_x: usize,
    /// Number of attention heads on `x`.
    pub n_heads_x: usize,
    /// What the model reads. Default: tokens.
    #[config(default = "InputKind::Tokens")]
    pub input: InputKind,
    /// Vocabulary size for token inputs (ignored for vector inputs). Default: 0 (use `output_size`).
    #[config(default = 0)]
    pub vocab_size: usize,
    /// Width of the `y` stream. Default: 0.
    #[config(default = 0)]
    pub d_y: usize,
    /// Number of attention heads on `y`. Default: 1.
    #[config(default = 1)]
    pub n_heads_y: usize,
    /// Readout layer `l`: number of two-stream layers; 0 gives the baseline. Default: 0.
    #[config(default = 0)]
    pub readout_layer: usize,
    /// Rank `r` of every generated operator. Default: 4.
    #[config(default = 4)]
    pub rank: usize,
    /// Number `M` of templates per operator. Default: 16.
    #[config(default = 16)]
    pub n_templates: usize,
    /// Mixing non-linearity `h`. Default: tanh.
    #[config(default = "Mixing::Tanh")]
    pub mixing: Mixing,
    /// MLP inner size as a multiple of the stream width. Default: 4.
    #[config(default = 4)]
    pub mlp_ratio: usize,
    /// VAE variant: `y^l` becomes the mean of a Gaussian whose log-variance is predicted from it. Default: false.
    #[config(default = false)]
    pub vae: bool,
    /// Standard deviation of the initial weights. Default: 0.02 (GPT-2).
    #[config(default = 0.02)]
    pub init_std: f64,
}

impl CgtConfig {
    /// A plain (x-only) transformer with the same `x` hyper-parameters.
    pub fn baseline(&self) -> Self {
        let mut config = self.clone();
        config.readout_layer = 0;
        config.d_y = 0;
        config.vae = false;
        config
    }

    /// A plain transformer whose `x` is `d_x + d_y` wide (rounded up to a multiple of the head
    /// width), with heads as wide as `x`'s now: the widened baseline of the paper's Fig. 5.
    pub fn wide_baseline(&self) -> Self {
        let mut config = self.baseline();
        let head_width = (self.d_x / self.n_heads_x.max(1)).max(1);
        config.n_heads_x = (self.d_x + self.d_y).div_ceil(head_width);
        config.d_x = config.n_heads_x * head_width;
        config
    }

    /// True when the model has a `y` stream and template operators.
    pub fn is_guided(&self) -> bool {
        self.readout_layer > 0
    }

    /// Vocabulary size used by the token embedding.
    pub fn token_vocab(&self) -> usize {
        if self.vocab_size == 0 {
            self.output_size
        } else {
            self.vocab_size
        }
    }

    /// Checks every constraint between the hyper-parameters.
    pub fn validate(&self) -> std::result::Result<(), CgtError> {
        let bad = |msg: String| Err(CgtError::InvalidConfig(msg));
        if self.output_size == 0 || self.max_seq_len == 0 || self.n_layers == 0 {
            return bad("output_size, max_seq_len and n_layers must be positive".into());
        }
        if self.d_x == 0 || self.n_heads_x == 0 || !self.d_x.is_multiple_of(self.n_heads_x) {
            return bad(format!(
                "d_x = {} must be a positive multiple of n_heads_x = {}",
                self.d_x, self.n_heads_x
            ));
        }
        if self.mlp_ratio == 0 {
            return bad("mlp_ratio must be positive".into());
        }
        if self.input.vector_width() == Some(0) {
            return bad("vector input dimension must be positive".into());
        }
        if let InputKind::PaddedVectors(width) = self.input {
            let narrowest = if self.is_guided() {
                self.d_x.min(self.d_y)
            } else {
                self.d_x
            };
            if width > narrowest {
                return bad(format!(
                    "zero-padded vectors of width {width} do not fit a stream of width {narrowest}"
                ));
            }
        }
        if self.is_guided() {
            if self.readout_layer >= self.n_layers {
                return bad(format!(
                    "readout_layer = {} must be below n_layers = {} (at least one guided layer)",
                    self.readout_layer, self.n_layers
                ));
            }
            if self.d_y == 0 || self.n_heads_y == 0 || !self.d_y.is_multiple_of(self.n_heads_y) {
                return bad(format!(
                    "d_y = {} must be a positive multiple of n_heads_y = {}",
                    self.d_y, self.n_heads_y
                ));
            }
            if self.rank == 0 || self.n_templates == 0 {
                return bad("rank and n_templates must be positive".into());
            }
        } else if self.vae {
            return bad("the VAE variant needs a y stream (readout_layer > 0)".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guided() -> CgtConfig {
        CgtConfig::new(16, 32, 3, 16, 2)
            .with_d_y(8)
            .with_n_heads_y(2)
            .with_readout_layer(2)
    }

    #[test]
    fn valid_configs_pass() {
        guided().validate().unwrap();
        guided().baseline().validate().unwrap();
        assert!(!guided().baseline().is_guided());
    }

    #[test]
    fn bad_configs_are_typed_errors() {
        for config in [
            guided().with_readout_layer(3),
            guided().with_d_y(7),
            guided().with_rank(0),
            CgtConfig {
                d_x: 15,
                ..guided()
            },
            guided().baseline().with_vae(true),
            guided().with_input(InputKind::Vectors(0)),
            guided().with_input(InputKind::PaddedVectors(9)),
        ] {
            assert!(matches!(config.validate(), Err(CgtError::InvalidConfig(_))));
        }
    }
}
