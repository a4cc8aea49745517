//! Validated TinT hyper-parameters (docs/construction.md §1.2) and the sizes derived from them.

use crate::error::TintOpsError;

/// Size of the official causal-mask buffer (`max_position_embeddings`): `P + T` may not exceed it.
pub const MAX_POSITION_EMBEDDINGS: usize = 2048;

/// The TinT hyper-parameters `(D, H, Ds, P, Hs, Tmax, T)`, checked against every constraint of
/// docs/construction.md §1.2 by [`TintDims::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TintDims {
    d_model: usize,
    n_heads_aux: usize,
    d_sim: usize,
    n_prefixes: usize,
    n_heads_sim: usize,
    max_seq_length: usize,
    seq_length: usize,
}

impl TintDims {
    /// Validates `(D, H, Ds, P, Hs, Tmax, T)`.
    ///
    /// # Errors
    /// The first violated rule of docs/construction.md §1.2, with the offending values.
    pub fn new(
        d_model: usize,
        n_heads_aux: usize,
        d_sim: usize,
        n_prefixes: usize,
        n_heads_sim: usize,
        max_seq_length: usize,
        seq_length: usize,
    ) -> Result<Self, TintOpsError> {
        for (name, value) in [
            ("D (d_model)", d_model),
            ("H (n_heads_aux)", n_heads_aux),
            ("Ds (d_sim)", d_sim),
            ("P (n_prefixes)", n_prefixes),
            ("Hs (n_heads_sim)", n_heads_sim),
            ("Tmax (max_seq_length)", max_seq_length),
            ("T (seq_length)", seq_length),
        ] {
            if value == 0 {
                return Err(TintOpsError::ZeroSize { name });
            }
        }
        // Rule 1.
        if !d_model.is_multiple_of(n_prefixes) {
            return Err(TintOpsError::ModelNotMultipleOfPrefixes {
                d_model,
                n_prefixes,
            });
        }
        let stack = d_model / n_prefixes;
        // Rule 2.
        if !d_sim.is_multiple_of(n_prefixes) || d_sim < d_model * (stack + 1) {
            return Err(TintOpsError::SimWidthTooSmallForStacking {
                d_sim,
                n_prefixes,
                d_model,
                stack,
            });
        }
        // Rule 3.
        if d_sim < 4 * d_model {
            return Err(TintOpsError::SimWidthTooSmallForMemory { d_sim, d_model });
        }
        if !d_model.is_multiple_of(n_heads_aux) {
            return Err(TintOpsError::AuxHeadsDoNotDivideModel {
                d_model,
                n_heads_aux,
            });
        }
        // Rule 4.
        let head_layout_ok = d_sim.is_multiple_of(n_heads_sim)
            && d_model.is_multiple_of(d_sim / n_heads_sim)
            && n_heads_aux.is_multiple_of(d_model / (d_sim / n_heads_sim))
            && n_heads_aux <= n_heads_sim;
        if !head_layout_ok {
            return Err(TintOpsError::HeadLayout {
                d_sim,
                n_heads_sim,
                d_model,
                n_heads_aux,
            });
        }
        let head_dim_sim = d_sim / n_heads_sim;
        // Rule 5.
        for k in 1..=3 {
            let rest = d_sim - k * d_model;
            if !rest.is_multiple_of(n_prefixes) || !rest.is_multiple_of(head_dim_sim) {
                return Err(TintOpsError::MemoryAlignment {
                    d_sim,
                    d_model,
                    n_prefixes,
                    head_dim_sim,
                });
            }
        }
        let dims = Self {
            d_model,
            n_heads_aux,
            d_sim,
            n_prefixes,
            n_heads_sim,
            max_seq_length,
            seq_length,
        };
        dims.with_seq_length(seq_length)
    }

    /// The same dims with another sequence length `T`.
    ///
    /// # Errors
    /// Rule 6 (`T <= Tmax`, `P + T <= 2048`) or `T == 0`.
    pub fn with_seq_length(self, seq_length: usize) -> Result<Self, TintOpsError> {
        if seq_length == 0 {
            return Err(TintOpsError::ZeroSize {
                name: "T (seq_length)",
            });
        }
        if seq_length > self.max_seq_length
            || self.n_prefixes + seq_length > MAX_POSITION_EMBEDDINGS
        {
            return Err(TintOpsError::SequenceTooLong {
                seq_length,
                max_seq_length: self.max_seq_length,
                n_prefixes: self.n_prefixes,
                max_position_embeddings: MAX_POSITION_EMBEDDINGS,
            });
        }
        Ok(Self { seq_length, ..self })
    }

    /// `D`: auxiliary model width.
    pub fn d_model(&self) -> usize {
        self.d_model
    }
    /// `H`: auxiliary attention heads.
    pub fn n_heads_aux(&self) -> usize {
        self.n_heads_aux
    }
    /// `Ds`: TinT width.
    pub fn d_sim(&self) -> usize {
        self.d_sim
    }
    /// `P`: number of prefix rows.
    pub fn n_prefixes(&self) -> usize {
        self.n_prefixes
    }
    /// `Hs`: TinT heads of the softmax modules.
    pub fn n_heads_sim(&self) -> usize {
        self.n_heads_sim
    }
    /// `Tmax`: maximal auxiliary sequence length.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }
    /// `T`: sequence length of this batch.
    pub fn seq_length(&self) -> usize {
        self.seq_length
    }
    /// `S = A = D/P`: weight rows stacked per prefix row (= shards per weight row).
    pub fn stack(&self) -> usize {
        self.d_model / self.n_prefixes
    }
    /// `nl = Ds/P`: number of linear heads (head size `P`).
    pub fn n_linear_heads(&self) -> usize {
        self.d_sim / self.n_prefixes
    }
    /// `hd = Ds/Hs`: head size of the softmax modules.
    pub fn head_dim_sim(&self) -> usize {
        self.d_sim / self.n_heads_sim
    }
    /// `h_a = D/H`: auxiliary head size.
    pub fn head_dim_aux(&self) -> usize {
        self.d_model / self.n_heads_aux
    }
    /// `Pd = Tmax + P`: size of the one-hot position vectors.
    pub fn position_dim(&self) -> usize {
        self.max_seq_length + self.n_prefixes
    }
    /// `N = P + T`: rows per sequence.
    pub fn n_rows(&self) -> usize {
        self.n_prefixes + self.seq_length
    }
    /// `Ds - D`: memory of LinearForward / ActivationForward (§2.4).
    pub fn linear_memory_index(&self) -> usize {
        self.d_sim - self.d_model
    }
    /// `Ds - 2D`: memory `[xhat, x]` of LayerNormForward (§2.4).
    pub fn ln_memory_index(&self) -> usize {
        self.d_sim - 2 * self.d_model
    }
    /// `Ds - 3D`: memory `[Q, K, x]` of the self-attention forward (§2.4).
    pub fn attn_memory_index(&self) -> usize {
        self.d_sim - 3 * self.d_model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_gpt2_settings_are_valid() {
        let dims = TintDims::new(768, 12, 3072, 256, 12, 1024, 1024).unwrap();
        assert_eq!(dims.stack(), 3);
        assert_eq!(dims.n_linear_heads(), 12);
        assert_eq!(dims.head_dim_sim(), 256);
        assert_eq!(dims.position_dim(), 1280);
        assert_eq!(dims.attn_memory_index(), 768);
        // gpt2-medium: S = 4.
        assert!(TintDims::new(1024, 16, 5120, 256, 20, 1024, 512).is_ok());
        // opt-1.3b.
        assert!(TintDims::new(2048, 32, 10240, 512, 40, 2048, 512).is_ok());
    }

    #[test]
    fn each_rule_is_reported() {
        assert!(matches!(
            TintDims::new(10, 2, 40, 4, 4, 8, 8),
            Err(TintOpsError::ModelNotMultipleOfPrefixes {
                d_model: 10,
                n_prefixes: 4
            })
        ));
        // D = 8, P = 4, S = 2: needs Ds >= 24.
        assert!(matches!(
            TintDims::new(8, 2, 20, 4, 5, 8, 8),
            Err(TintOpsError::SimWidthTooSmallForStacking { d_sim: 20, .. })
        ));
        // D = 8, P = 8, S = 1: Ds = 16 passes rule 2, fails rule 3.
        assert!(matches!(
            TintDims::new(8, 2, 16, 8, 2, 8, 8),
            Err(TintOpsError::SimWidthTooSmallForMemory {
                d_sim: 16,
                d_model: 8
            })
        ));
        // hd = 32/8 = 4 divides 8, npart = 2 does not divide H = 3 (and D % H fails first).
        assert!(matches!(
            TintDims::new(8, 3, 32, 4, 8, 8, 8),
            Err(TintOpsError::AuxHeadsDoNotDivideModel { .. })
        ));
        // H = 4 > Hs = 2.
        assert!(matches!(
            TintDims::new(8, 4, 32, 4, 2, 8, 8),
            Err(TintOpsError::HeadLayout {
                n_heads_sim: 2,
                n_heads_aux: 4,
                ..
            })
        ));
        // T > Tmax.
        let err = TintDims::new(8, 2, 32, 4, 4, 8, 9).unwrap_err();
        assert!(matches!(
            err,
            TintOpsError::SequenceTooLong { seq_length: 9, .. }
        ));
        assert!(err.to_string().contains("rule 6"));
        assert!(matches!(
            TintDims::new(8, 2, 32, 4, 4, 4000, 2046),
            Err(TintOpsError::SequenceTooLong { .. })
        ));
        assert!(matches!(
            TintDims::new(8, 0, 32, 4, 4, 8, 8),
            Err(TintOpsError::ZeroSize { .. })
        ));
    }
}
