//! Independent branches of a computation as parallel tasks on CPU backends.
//!
//! On burn-flex most of a TinT step or an auxiliary forward is element-wise work that runs on one
//! thread (only the larger products use every core), so branches of the computation that do not
//! depend on each other — the sequences of a batch (tint-sim's `sequences`), the `Di / D` chunks of
//! a simulated MLP, the backward and the descent halves of a backward-descent module, two halves of
//! the heads of an attention, two halves of the token rows of an auxiliary MLP — leave cores idle
//! when run one after the other. Run as rayon tasks they fill them; the results are combined in
//! the same order as the sequential loop, so every float is computed and summed as before
//! (docs/performance.md, "Independent branches in parallel"). On a GPU backend one op stream is
//! the better form and the branches run in order.
//!
//! Its own crate because both `tint-ops` (the simulator's modules; re-exported there as
//! `tint_ops::branches`) and `tint-aux` (the auxiliary models) use it, and tint-ops does not see tint-aux.

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

/// `f()`, run on a worker of rayon's pool when [`runs_in_parallel`] holds for `device` and the
/// caller is not one already: the branches `f` forks ([`map_in_order`], [`join`]) and the rayon
/// kernels of the backend then start as local tasks of that worker, which the other workers steal,
/// instead of each being injected into the pool from outside while the calling thread sleeps.
/// Otherwise `f()` on the calling thread.
pub fn on_worker<B, T, F>(device: &B::Device, f: F) -> T
where
    B: Backend,
    T: Send,
    F: FnOnce() -> T + Send,
{
    if rayon::current_thread_index().is_none() && runs_in_parallel::<B>(device) {
        rayon::scope(|_| f())
    } else {
        f()
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
    use burn::backend::{Autodiff, Flex};

    type TestBackend = Flex;

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
        // From a thread outside every pool: on a worker of the global pool when it has several
        // threads, never under autodiff.
        let (flex, autodiff, threads) = std::thread::spawn(move || {
            (
                on_worker::<TestBackend, _, _>(&device, rayon::current_thread_index),
                on_worker::<Autodiff<TestBackend>, _, _>(&device, rayon::current_thread_index),
                rayon::current_num_threads(),
            )
        })
        .join()
        .expect("thread");
        assert_eq!(flex.is_some(), threads > 1);
        assert!(autodiff.is_none());
    }
}
