//! Independent branches of a TinT step as parallel tasks on CPU backends.
//!
//! On burn-flex most of a step is element-wise work that runs on one thread (only the larger
//! products use every core), so branches of the computation that do not depend on each other — the
//! sequences of a batch (tint-sim's `sequences`), the `Di / D` chunks of a simulated MLP forward and
//! backward, the backward and the descent halves of a backward-descent module — leave cores idle when run one after the other. Run as rayon tasks they fill them; the
//! results are combined in the same order as the sequential loop, so every float is computed and
//! summed as before (docs/performance.md, "Independent branches in parallel"). On a GPU backend one
//! op stream is the better form and the branches run in order.

use burn::tensor::backend::Backend;
use rayon::prelude::*;

/// Whether the independent branches of a step on `B` run as parallel rayon tasks: on CPU backends
/// (flex, ndarray) when rayon has more than one thread; never on GPU backends, and never under
/// autodiff (a TinT step records no gradient graph, and one built from several threads would not
/// be tested). Decided by the backend's name (`flex`, `ndarray`; `autodiff<…>` excluded).
pub fn runs_in_parallel<B: Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    (name.contains("flex") || name.contains("ndarray"))
        && !name.contains("autodiff")
        && rayon::current_num_threads() > 1
}

/// `[f(0), f(1), …, f(n - 1)]`, in this order: as parallel rayon tasks when [`runs_in_parallel`]
/// holds for `device`, one after the other otherwise.
pub fn map_in_order<B, T, F>(device: &B::Device, n: usize, f: F) -> Vec<T>
where
    B: Backend,
    T: Send,
    F: Fn(usize) -> T + Sync + Send,
{
    if n > 1 && runs_in_parallel::<B>(device) {
        (0..n).into_par_iter().map(f).collect()
    } else {
        (0..n).map(f).collect()
    }
}

/// `(a(), b())`: as two parallel rayon tasks when [`runs_in_parallel`] holds for `device`, one after
/// the other otherwise.
pub fn join<B, RA, RB, FA, FB>(device: &B::Device, a: FA, b: FB) -> (RA, RB)
where
    B: Backend,
    RA: Send,
    RB: Send,
    FA: FnOnce() -> RA + Send,
    FB: FnOnce() -> RB + Send,
{
    if runs_in_parallel::<B>(device) {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestBackend;
    use burn::backend::Autodiff;

    /// Flex runs branches in parallel with two threads and in order with one; autodiff never.
    #[test]
    fn parallel_on_flex_with_threads_only() {
        let device = Default::default();
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .expect("rayon pool")
        };
        assert!(pool(2).install(|| runs_in_parallel::<TestBackend>(&device)));
        assert!(!pool(1).install(|| runs_in_parallel::<TestBackend>(&device)));
        assert!(!pool(2).install(|| runs_in_parallel::<Autodiff<TestBackend>>(&device)));
        let order = pool(2).install(|| map_in_order::<TestBackend, _, _>(&device, 5, |i| i * i));
        assert_eq!(order, vec![0, 1, 4, 9, 16]);
        let pair = pool(2).install(|| join::<TestBackend, _, _, _, _>(&device, || 1, || "b"));
        assert_eq!(pair, (1, "b"));
    }
}
