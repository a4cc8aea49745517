//! Reuse of the keys and values of a shared prefix when many contexts that begin alike are scored
//! one after another (in-context classification: the same demonstrations before every query).

use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use crate::attention::KeyValues;
use crate::model::sequence_ids;
use crate::{AuxError, AuxModel};

/// The last scored context's token ids and, per block, the keys and values of its positions.
/// [`AuxModel::last_position_logits_reusing`] recomputes only what follows the longest common
/// prefix of the new context with the stored one.
///
/// A cache belongs to one model with fixed weights: after the weights change (an SGD step), use a
/// new one ([`PrefixCache::clear`]).
#[derive(Debug, Clone)]
pub struct PrefixCache<B: Backend> {
    ids: Vec<u32>,
    layers: Vec<KeyValues<B>>,
    reused: usize,
    computed: usize,
}

impl<B: Backend> Default for PrefixCache<B> {
    fn default() -> Self {
        Self {
            ids: Vec::new(),
            layers: Vec::new(),
            reused: 0,
            computed: 0,
        }
    }
}

impl<B: Backend> PrefixCache<B> {
    /// Forgets the stored context (the counters are kept).
    pub fn clear(&mut self) {
        self.ids.clear();
        self.layers.clear();
    }

    /// Positions taken from the cache, over every call.
    pub fn reused_positions(&self) -> usize {
        self.reused
    }

    /// Positions run through the model, over every call.
    pub fn computed_positions(&self) -> usize {
        self.computed
    }
}

impl<B: Backend> AuxModel<B> {
    /// [`AuxModel::last_position_logits`] of one sequence `ids`, reusing the keys and values of
    /// the longest prefix it shares with the context `cache` holds (at least the last position is
    /// recomputed), then storing `ids`' own. Same logits up to the summation order of the
    /// attention products. LLaMA models reuse; GPT-2 and OPT run the whole sequence (the cache
    /// stays empty).
    ///
    /// # Shapes
    ///
    /// - output: `[1, 1, vocab_size]`
    ///
    /// # Errors
    ///
    /// Those of [`AuxModel::last_position_logits`] (empty, too long or out-of-vocabulary ids).
    pub fn last_position_logits_reusing(
        &self,
        ids: &[u32],
        cache: &mut PrefixCache<B>,
    ) -> Result<Tensor<B, 3>, AuxError> {
        let device = self.devices()[0].clone();
        let full = sequence_ids::<B>(ids, &device);
        let AuxModel::Llama(llama) = self else {
            cache.computed += ids.len();
            return self.last_position_logits(full);
        };
        self.validate_input_ids(&full)?;
        let shared = cache
            .ids
            .iter()
            .zip(ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(ids.len() - 1);
        // `cache.ids` and `cache.layers` are stored together: a shared prefix has its layers.
        let past: Option<Vec<KeyValues<B>>> =
            (shared > 0).then(|| cache.layers.iter().map(|kv| kv.truncated(shared)).collect());
        let (normed, layers) =
            llama.final_normed_after(sequence_ids::<B>(&ids[shared..], &device), past.as_deref());
        let n_new = ids.len() - shared;
        cache.ids = ids.to_vec();
        cache.layers = layers;
        cache.reused += shared;
        cache.computed += n_new;
        Ok(llama.head(normed.narrow(1, n_new - 1, 1)))
    }
}
