//! Parameter counts of a TinT simulator computed without building it: the official count of
//! docs/construction.md §11 (what `TinT_Creator` prints) and the paper's analytic, bias-free count (arXiv
//! appendix, Table 3: `Q = 4 Q_split + 3 T_sim D_sim / H_sim`, `Q_split = D_sim^2 / H_sim + H_sim D_sim`).

use tint_ops::{param_count as ops, TintDims};

use crate::config::TintConfig;
use crate::error::SimError;
use crate::params::AuxDims;

/// The official parameter count (docs/construction.md §11) and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfficialParamCount {
    /// One forward block `FB`, including its prefix blocks.
    pub forward_block: usize,
    /// One backward block `BB`.
    pub backward_block: usize,
    /// The gradient module `GM` (ln_f forward, backward + descent, its prefix block).
    pub gradient_module: usize,
    /// Parameters of the auxiliary model (embeddings, blocks, final LayerNorm).
    pub auxiliary: usize,
    /// Everything: embeddings, `L` forward blocks, the backward blocks, `GM` and the extra final
    /// forward blocks when they are not reused.
    pub total: usize,
}

/// Validated TinT sizes of `config` for a model of `aux` sizes (`T = Tmax`).
pub fn tint_dims(
    aux: &AuxDims,
    config: &TintConfig,
    max_seq_length: usize,
) -> Result<TintDims, SimError> {
    Ok(TintDims::new(
        aux.d_model,
        aux.n_heads,
        config.hidden_size,
        config.num_prefixes,
        config.num_heads,
        max_seq_length,
        max_seq_length,
    )?)
}

/// The official count (docs/construction.md §11) for an auxiliary model with `aux` sizes whose sequences have at
/// most `max_seq_length` positions (`n_positions - offset`).
///
/// # Errors
/// Violated TinT constraints.
pub fn official_param_count(
    aux: &AuxDims,
    config: &TintConfig,
    max_seq_length: usize,
) -> Result<OfficialParamCount, SimError> {
    let dims = tint_dims(aux, config, max_seq_length)?;
    crate::config::check_mlp_width(aux)?;
    let (d, p, ds) = (aux.d_model, config.num_prefixes, config.hidden_size);
    let n_chunks = aux.d_inner / d;
    let prefix_params = crate::config::blocks_per_layer(n_chunks) * p * ds;
    let forward_modules = 2 * ops::layer_norm_forward(&dims)
        + ops::attention_forward(&dims)
        + 3 * ops::linear_forward(&dims)
        + ops::activation_forward(&dims);
    let forward_block = forward_modules + prefix_params;
    let backward_block = 3 * ops::linear_descent_backward(&dims)
        + ops::activation_backward(&dims)
        + 2 * ops::layer_norm_descent_backward(&dims)
        + ops::attention_backward_descent(&dims);
    let gradient_module =
        ops::layer_norm_forward(&dims) + ops::layer_norm_descent_backward(&dims) + p * ds;
    let n_sim = config.simulated_layers(aux.n_layers);
    let n_fb = config.step.n_forward_backward;
    let backward_copies = if config.reuse_backward_blocks {
        1
    } else {
        n_fb
    };
    let extra_forward = if config.reuse_forward_blocks {
        0
    } else {
        n_sim * n_fb * forward_modules
    };
    let embeddings = aux.vocab_size * d + aux.n_positions * d;
    let total = embeddings
        + aux.n_layers * forward_block
        + n_sim * backward_copies * backward_block
        + gradient_module
        + extra_forward;
    let per_layer = 4 * (d * d + d) + 2 * d * aux.d_inner + aux.d_inner + d + 4 * d;
    Ok(OfficialParamCount {
        forward_block,
        backward_block,
        gradient_module,
        auxiliary: embeddings + aux.n_layers * per_layer + 2 * d,
        total,
    })
}

/// The paper's analytic, bias-free count (arXiv appendix Table 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaperParamCount {
    /// `Q_split = D_sim^2 / H_sim + H_sim D_sim`: an H_sim-split linear operation.
    pub q_split: usize,
    /// `Q = 4 Q_split + 3 T_sim D_sim / H_sim`: a TinT linear forward module.
    pub q: usize,
    /// Forward modules: `7 Q L + L Q_split`.
    pub forward: usize,
    /// Backward modules: `(7 Q + 6 D_sim H_sim) L`.
    pub backward: usize,
    /// Descent modules: `7 Q L`.
    pub descent: usize,
    /// `forward + backward + descent` (the table's "Total" row omits the `L Q_split` of the
    /// activation forward modules; we keep the sum of the columns).
    pub total: usize,
}

/// The paper's count for width `d_sim`, `h_sim` heads, `t_sim = T_aux + D_aux / 4` positions and
/// `n_layers` auxiliary layers.
pub fn paper_param_count(
    d_sim: usize,
    h_sim: usize,
    t_sim: usize,
    n_layers: usize,
) -> PaperParamCount {
    let q_split = d_sim * d_sim / h_sim + h_sim * d_sim;
    let q = 4 * q_split + 3 * t_sim * d_sim / h_sim;
    let forward = 7 * q * n_layers + n_layers * q_split;
    let backward = (7 * q + 6 * d_sim * h_sim) * n_layers;
    let descent = 7 * q * n_layers;
    PaperParamCount {
        q_split,
        q,
        forward,
        backward,
        descent,
        total: forward + backward + descent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StepConfig;

    /// GPT-2 small (docs/construction.md §1.3).
    fn gpt2() -> AuxDims {
        AuxDims {
            d_model: 768,
            n_heads: 12,
            n_layers: 12,
            d_inner: 3072,
            vocab_size: 50257,
            n_positions: 1024,
        }
    }

    #[test]
    fn gpt2_readme_settings_give_the_official_count() {
        let config = TintConfig {
            step: StepConfig {
                n_simulation_layers: Some(12),
                ..StepConfig::default()
            },
            reuse_forward_blocks: true,
            reuse_backward_blocks: true,
            restrict_prefixes: true,
            ..TintConfig::for_model(768, 256, 256)
        };
        assert_eq!((config.hidden_size, config.num_heads), (3072, 12));
        let count = official_param_count(&gpt2(), &config, 1024).unwrap();
        // Values measured from the official code (docs/construction.md §11).
        assert_eq!(count.forward_block, 53_861_988);
        assert_eq!(count.backward_block, 64_514_958);
        assert_eq!(count.gradient_module, 16_889_754);
        assert_eq!(count.auxiliary, 124_439_808);
        assert_eq!(count.total, 1_476_796_914);
    }

    #[test]
    fn opt_125m_paper_count_matches_the_table() {
        // OPT-125M: D_sim = 4 * 768, H_sim = 12, T_sim = 2048 + 768 / 4, 12 layers.
        let count = paper_param_count(3072, 12, 2048 + 192, 12);
        assert_eq!(count.q_split, 3072 * 3072 / 12 + 12 * 3072);
        let billions = |n: usize| (n as f64 / 1e8).round() / 10.0;
        // Table 3 row "OPT-125M": 0.4B, 0.4B, 0.4B, 1.2B (the total truncates 1.28B).
        assert_eq!(billions(count.forward), 0.4);
        assert_eq!(billions(count.backward), 0.4);
        assert_eq!(billions(count.descent), 0.4);
        assert!(
            (1.2e9..1.3e9).contains(&(count.total as f64)),
            "{}",
            count.total
        );
    }
}
