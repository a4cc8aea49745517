//! Causal masks kept on the device: a `TintAttention` used in every layer and pass builds the same
//! `[1, n_q, n_k]` mask for the same row ranges each time; built once per shape, it stays resident
//! instead of being filled on the host and uploaded at every call (issue 17: "keep masks resident";
//! on a GPU each upload is a host-to-device copy).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::tensor::{backend::Backend, DType, Tensor, TensorData};

/// What a causal mask holds where a key is visible and where it is hidden.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskValues {
    /// Value at the visible keys (1 for a multiplicative mask, 0 for an additive one).
    pub visible: f32,
    /// Value at the hidden keys (0 for a multiplicative mask, the masked score for an additive one).
    pub hidden: f32,
}

/// A causal mask's identity: backend, row ranges, values (as bits, so −∞ is a key) and dtype.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MaskKey {
    backend: TypeId,
    q_start: usize,
    n_q: usize,
    k_start: usize,
    n_k: usize,
    visible: u32,
    hidden: u32,
    dtype: DType,
}

/// Causal masks by backend, shape and values, shared by the clones of one module; a mask built on
/// another device than the one asked for is rebuilt. Not generic over the backend (a module's
/// non-parameter field must not be: `valid()` maps a module to its inner backend), so each mask is
/// stored as `Any` under its backend's `TypeId`.
#[derive(Clone, Default)]
pub struct CausalMaskCache {
    masks: Arc<Mutex<HashMap<MaskKey, Box<dyn Any + Send>>>>,
}

impl core::fmt::Debug for CausalMaskCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let n = self.masks.lock().map(|m| m.len()).unwrap_or(0);
        write!(f, "CausalMaskCache({n} masks)")
    }
}

impl CausalMaskCache {
    /// The mask of queries `q_start..q_start + n_q` against keys `k_start..k_start + n_k`: query
    /// row `i` sees the keys `j` with `k_start + j <= q_start + i`, which hold `values.visible`;
    /// the others hold `values.hidden`.
    ///
    /// # Shapes
    /// * output: `[1, n_q, n_k]`
    pub fn get<B: Backend>(
        &self,
        (q_start, n_q): (usize, usize),
        (k_start, n_k): (usize, usize),
        values: MaskValues,
        dtype: DType,
        device: &B::Device,
    ) -> Tensor<B, 3> {
        let key = MaskKey {
            backend: TypeId::of::<B>(),
            q_start,
            n_q,
            k_start,
            n_k,
            visible: values.visible.to_bits(),
            hidden: values.hidden.to_bits(),
            dtype,
        };
        // A poisoned lock only means another thread panicked while holding it; the map is
        // still valid (entries are inserted whole).
        let mut masks = self.masks.lock().unwrap_or_else(|e| e.into_inner());
        let cached = masks
            .get(&key)
            .and_then(|m| m.downcast_ref::<Tensor<B, 3>>())
            .filter(|m| &m.device() == device);
        if let Some(mask) = cached {
            return mask.clone();
        }
        let mask = causal_mask::<B>((q_start, n_q), (k_start, n_k), values, dtype, device);
        masks.insert(key, Box::new(mask.clone()));
        mask
    }
}

/// Builds the mask of [`CausalMaskCache::get`]: each query row is a prefix of visible keys,
/// filled in place on the host (an element-wise iterator over `n_q · n_k` values was ~5 % of a
/// tiny structured step's main thread).
///
/// # Shapes
/// * output: `[1, n_q, n_k]`
pub fn causal_mask<B: Backend>(
    (q_start, n_q): (usize, usize),
    (k_start, n_k): (usize, usize),
    values: MaskValues,
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, 3> {
    let mut mask = vec![values.hidden; n_q * n_k];
    if n_k > 0 {
        for (i, row) in mask.chunks_mut(n_k).enumerate() {
            let visible = (q_start + i + 1).saturating_sub(k_start).min(n_k);
            row[..visible].fill(values.visible);
        }
    }
    Tensor::<B, 3>::from_data(TensorData::new(mask, [1, n_q, n_k]), (device, dtype))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestBackend;

    /// The cached mask equals a fresh one, and each query row sees exactly the keys at or before it.
    #[test]
    fn cached_mask_is_the_causal_mask() {
        let device = Default::default();
        let cache = CausalMaskCache::default();
        let values = MaskValues {
            visible: 0.0,
            hidden: f32::NEG_INFINITY,
        };
        for _ in 0..2 {
            let mask = cache.get::<TestBackend>((5, 4), (3, 6), values, DType::F32, &device);
            let host = mask.into_data().to_vec::<f32>().unwrap();
            for i in 0..4 {
                for j in 0..6 {
                    let want = if 3 + j <= 5 + i {
                        0.0
                    } else {
                        f32::NEG_INFINITY
                    };
                    assert_eq!(host[i * 6 + j], want, "query {i}, key {j}");
                }
            }
        }
        assert_eq!(cache.masks.lock().unwrap().len(), 1, "built once");
        let linear = MaskValues {
            visible: 1.0,
            hidden: 0.0,
        };
        let fresh = causal_mask::<TestBackend>((0, 3), (0, 3), linear, DType::F32, &device);
        let cached = cache.get::<TestBackend>((0, 3), (0, 3), linear, DType::F32, &device);
        assert_eq!(
            fresh.into_data().to_vec::<f32>().unwrap(),
            cached.into_data().to_vec::<f32>().unwrap()
        );
        assert_eq!(cache.masks.lock().unwrap().len(), 2);
    }
}
