//! One backward pass per training set across a grid of step sizes: tuning a step size scores the
//! same demonstrations at every value of its grid, and the update of one step is `W − η G` with
//! `G` independent of `η` ([`tint_aux::SgdGradient`] for dynamic evaluation,
//! [`tint_sim::StepDirection`] for TinT's functional reference). A [`StepReuse`] keeps the last
//! training set's `G`, keyed by what it was computed from; methods built for different step sizes
//! share it, and each applies its own step size with the step's own operations (the updated
//! weights equal, to the bit, those of a step computed afresh: the tests in tint-aux and tint-sim).

use std::cell::RefCell;
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

/// The kept gradient and what it was computed from.
type Kept<T> = Option<(StepKey, Rc<T>)>;

/// The last gradient computed, shared by the methods built for the values of one grid (a cheap
/// handle: clones share the slot).
pub struct StepReuse<T: ?Sized> {
    slot: Rc<RefCell<Kept<T>>>,
    reused: Rc<RefCell<usize>>,
}

impl<T: ?Sized> Clone for StepReuse<T> {
    fn clone(&self) -> Self {
        Self {
            slot: Rc::clone(&self.slot),
            reused: Rc::clone(&self.reused),
        }
    }
}

impl<T: ?Sized> Default for StepReuse<T> {
    fn default() -> Self {
        Self {
            slot: Rc::new(RefCell::new(None)),
            reused: Rc::new(RefCell::new(0)),
        }
    }
}

impl<T: ?Sized> StepReuse<T> {
    /// The gradient of `key`: the kept one when it was computed from the same key, else
    /// `compute()`'s, which replaces it (the old one is dropped first: memory); an error when
    /// `compute` fails, which keeps nothing.
    pub fn get_or_compute<E>(
        &self,
        key: StepKey,
        compute: impl FnOnce() -> Result<Rc<T>, E>,
    ) -> Result<Rc<T>, E> {
        if let Some((kept, value)) = self.slot.borrow().as_ref() {
            if *kept == key {
                *self.reused.borrow_mut() += 1;
                return Ok(Rc::clone(value));
            }
        }
        self.slot.borrow_mut().take();
        let value = compute()?;
        *self.slot.borrow_mut() = Some((key, Rc::clone(&value)));
        Ok(value)
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

    #[test]
    fn a_gradient_is_reused_only_for_the_same_key() {
        let reuse = StepReuse::<f64>::default();
        let shared = reuse.clone();
        let computed = std::cell::Cell::new(0);
        let get = |k: StepKey, v: f64| {
            *shared
                .get_or_compute::<()>(k, || {
                    computed.set(computed.get() + 1);
                    Ok(Rc::new(v))
                })
                .unwrap()
        };
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
}
