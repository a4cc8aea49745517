//! One backward pass per training set across a grid of step sizes and the cells that follow:
//! tuning a step size scores the same training data at every value of its grid, and the update
//! of one step is `W − η G` with `G` independent of `η` ([`tint_aux::SgdGradient`] for dynamic
//! evaluation, [`tint_sim::StepDirection`] for TinT's functional reference). A [`StepReuse`] keeps
//! the last few training sets' `G` (its capacity), keyed by what each was computed from; methods
//! built for different step sizes share them, and each applies its own step size with the step's
//! own operations (the updated weights equal, to the bit, those of a step computed afresh: the
//! tests in tint-aux and tint-sim). Its users: `eval icl` keeps one per tuned seed (whose tuning at
//! the largest k draws the same demonstrations from the same pool as the evaluation cell of that
//! seed); `eval lm`'s tuning ([`crate::lm_tune::tune_lm`]) scores its grid block by block and keeps
//! the last block's dynamic-evaluation gradient ([`crate::methods::DynEval::sharing_gradients`]) or
//! the functional reference's descent direction ([`crate::methods::Tint::sharing_directions`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// What a kept gradient was computed from: everything that enters it but the step size.
#[derive(Debug, Clone, PartialEq)]
pub struct StepKey {
    /// The method's settings with the step size left out (e.g. the parameter selection and loss
    /// reduction, or the TinT configuration with `inner_lr` zeroed).
    pub settings: String,
    /// The training sequences' token ids.
    pub ids: Vec<Vec<u32>>,
    /// Their loss targets.
    pub targets: Vec<Vec<bool>>,
}

/// The kept gradients, oldest first, what each was computed from and the bytes it holds.
type Kept<T> = VecDeque<(StepKey, Rc<T>, u64)>;

/// The bytes a [`StepReuse`]'s kept gradients hold now, as declared when each was kept
/// ([`StepReuse::get_or_compute_sized`]): what another method's step admission counts beside its
/// own (`eval icl` keeps dynamic evaluation's gradients and TinT's directions at once). A cheap
/// handle that follows the reuse.
#[derive(Debug, Clone, Default)]
pub struct HeldBytes(Rc<Cell<u64>>);

impl HeldBytes {
    /// The bytes held now.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// The last gradients computed (at most `capacity`), shared by the methods built for the values
/// of one grid and by the cells that train on the same sets (a cheap handle: clones share the
/// slots).
pub struct StepReuse<T: ?Sized> {
    slots: Rc<RefCell<Kept<T>>>,
    capacity: usize,
    reused: Rc<RefCell<usize>>,
    held: HeldBytes,
}

impl<T: ?Sized> Clone for StepReuse<T> {
    fn clone(&self) -> Self {
        Self {
            slots: Rc::clone(&self.slots),
            capacity: self.capacity,
            reused: Rc::clone(&self.reused),
            held: self.held.clone(),
        }
    }
}

impl<T: ?Sized> Default for StepReuse<T> {
    /// Keeps one gradient: the last.
    fn default() -> Self {
        Self::with_capacity(1)
    }
}

impl<T: ?Sized> StepReuse<T> {
    /// Keeps the last `capacity` gradients (at least one): each takes the memory of the
    /// parameters it updates (e.g. 0.54 GB for every parameter of SmolLM2-135M in float32).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            slots: Rc::new(RefCell::new(VecDeque::new())),
            capacity: capacity.max(1),
            reused: Rc::new(RefCell::new(0)),
            held: HeldBytes::default(),
        }
    }

    /// How many gradients it keeps at most (the memory a step's admission counts beside it).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The gradient of `key`: a kept one computed from the same key, else `compute()`'s, which
    /// is kept in place of the oldest when all slots are full (that one is dropped before
    /// `compute` runs: memory); an error when `compute` fails, which keeps nothing new. Kept as
    /// holding no bytes ([`Self::get_or_compute_sized`] declares them).
    pub fn get_or_compute<E>(
        &self,
        key: StepKey,
        compute: impl FnOnce() -> Result<Rc<T>, E>,
    ) -> Result<Rc<T>, E> {
        self.get_or_compute_sized(key, 0, compute)
    }

    /// [`Self::get_or_compute`], a computed gradient kept as holding `bytes` ([`Self::held`]).
    pub fn get_or_compute_sized<E>(
        &self,
        key: StepKey,
        bytes: u64,
        compute: impl FnOnce() -> Result<Rc<T>, E>,
    ) -> Result<Rc<T>, E> {
        if let Some((_, value, _)) = self.slots.borrow().iter().find(|(kept, ..)| *kept == key) {
            *self.reused.borrow_mut() += 1;
            return Ok(Rc::clone(value));
        }
        {
            let mut slots = self.slots.borrow_mut();
            while slots.len() >= self.capacity {
                if let Some((_, _, dropped)) = slots.pop_front() {
                    self.held.0.set(self.held.get().saturating_sub(dropped));
                }
            }
        }
        let value = compute()?;
        self.slots
            .borrow_mut()
            .push_back((key, Rc::clone(&value), bytes));
        self.held.0.set(self.held.get().saturating_add(bytes));
        Ok(value)
    }

    /// The bytes its kept gradients hold now, as a handle that follows it.
    pub fn held(&self) -> HeldBytes {
        self.held.clone()
    }

    /// How many times a kept gradient was reused.
    pub fn reused(&self) -> usize {
        *self.reused.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(settings: &str, id: u32) -> StepKey {
        StepKey {
            settings: settings.into(),
            ids: vec![vec![1, id]],
            targets: vec![vec![false, true]],
        }
    }

    /// The held bytes follow what is kept: added when a gradient is kept, subtracted when it is
    /// dropped for a newer one, unchanged by a reuse or a failed computation; clones share them.
    #[test]
    fn held_bytes_follow_the_kept_gradients() {
        let reuse: StepReuse<f64> = StepReuse::with_capacity(2);
        let held = reuse.clone().held();
        let keep = |k: StepKey, bytes: u64| {
            reuse
                .get_or_compute_sized::<()>(k, bytes, || Ok(Rc::new(1.0)))
                .unwrap();
        };
        keep(key("a", 1), 100);
        keep(key("a", 2), 30);
        assert_eq!(held.get(), 130);
        keep(key("a", 1), 999);
        assert_eq!(held.get(), 130, "a reuse keeps nothing new");
        keep(key("a", 3), 7);
        assert_eq!(held.get(), 37, "the oldest (100) dropped");
        assert!(reuse
            .get_or_compute_sized(key("a", 4), 50, || Err::<Rc<f64>, ()>(()))
            .is_err());
        assert_eq!(
            held.get(),
            7,
            "dropped to make room; the failure keeps nothing"
        );
    }

    /// `get(key, v)`: the value of `key` from `reuse`, computing `v` (and counting it in
    /// `computed`) when nothing is kept for it.
    fn counting_get<'a>(
        reuse: &'a StepReuse<f64>,
        computed: &'a std::cell::Cell<usize>,
    ) -> impl Fn(StepKey, f64) -> f64 + 'a {
        move |k, v| {
            *reuse
                .get_or_compute::<()>(k, || {
                    computed.set(computed.get() + 1);
                    Ok(Rc::new(v))
                })
                .unwrap()
        }
    }

    #[test]
    fn a_gradient_is_reused_only_for_the_same_key() {
        let reuse = StepReuse::<f64>::default();
        let shared = reuse.clone();
        let computed = std::cell::Cell::new(0);
        let get = counting_get(&shared, &computed);
        assert_eq!(get(key("a", 2), 1.0), 1.0);
        assert_eq!(get(key("a", 2), 9.0), 1.0);
        // Another training set, then other settings: computed again.
        assert_eq!(get(key("a", 3), 2.0), 2.0);
        assert_eq!(get(key("b", 3), 3.0), 3.0);
        assert_eq!(computed.get(), 3);
        assert_eq!(reuse.reused(), 1);
        // An error keeps nothing: the key before it is computed again.
        assert!(matches!(
            reuse.get_or_compute(key("c", 3), || Err(())),
            Err(())
        ));
        assert_eq!(get(key("b", 3), 4.0), 4.0);
        assert_eq!(computed.get(), 4);
    }

    #[test]
    fn a_capacity_keeps_the_last_gradients_and_drops_the_oldest() {
        let reuse = StepReuse::<f64>::with_capacity(2);
        let computed = std::cell::Cell::new(0);
        let get = counting_get(&reuse, &computed);
        // Two training sets (the tuning of two seeds), then the cells of both: no new gradient.
        assert_eq!(get(key("a", 1), 1.0), 1.0);
        assert_eq!(get(key("a", 2), 2.0), 2.0);
        assert_eq!(get(key("a", 1), 9.0), 1.0);
        assert_eq!(get(key("a", 2), 9.0), 2.0);
        assert_eq!(computed.get(), 2);
        // A third set drops the oldest (set 1); set 2 is still kept.
        assert_eq!(get(key("a", 3), 3.0), 3.0);
        assert_eq!(get(key("a", 2), 9.0), 2.0);
        assert_eq!(get(key("a", 1), 4.0), 4.0);
        assert_eq!(computed.get(), 4);
        assert_eq!(reuse.reused(), 3);
        // A capacity of 0 keeps one.
        let one = StepReuse::<f64>::with_capacity(0);
        let v = one
            .get_or_compute::<()>(key("a", 1), || Ok(Rc::new(5.0)))
            .unwrap();
        assert_eq!(*v, 5.0);
        assert_eq!(
            *one.get_or_compute::<()>(key("a", 1), || Ok(Rc::new(6.0)))
                .unwrap(),
            5.0
        );
    }
}
