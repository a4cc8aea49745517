//! [`PerSeedStep`]: one method per demonstration seed, each with the step size tuned for that
//! seed (`--tune-per-seed`), run as one row.

use super::method::{IclMethod, ScoreRequest};
use super::prompt::{DemoFormat, TrainingSequences};
use crate::non_finite::NonFiniteOrigin;
use crate::EvalError;

/// The same method built once per seed with that seed's tuned step; the runner's
/// [`IclMethod::begin_seed`] selects which one adapts and scores. A seed without its own method
/// (the zero-shot run's seed 0 when 0 is not among the tuned seeds) uses the first seed's.
pub struct PerSeedStep<'a> {
    name: String,
    methods: Vec<(u64, Box<dyn IclMethod + 'a>)>,
    current: usize,
}

impl<'a> PerSeedStep<'a> {
    /// The row `name` (e.g. `dyn-eval(lr=per-seed,steps=1)`) over `methods`, one per seed.
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] for an empty list or a seed given twice.
    pub fn new(
        name: impl Into<String>,
        methods: Vec<(u64, Box<dyn IclMethod + 'a>)>,
    ) -> Result<Self, EvalError> {
        let seeds: Vec<u64> = methods.iter().map(|(s, _)| *s).collect();
        let repeated = seeds
            .iter()
            .enumerate()
            .any(|(i, s)| seeds[..i].contains(s));
        if seeds.is_empty() || repeated {
            return Err(EvalError::InvalidSetting {
                name: "--seeds",
                value: format!("{seeds:?}"),
                rule: "a per-seed step needs one method for each of one or more distinct seeds"
                    .into(),
            });
        }
        Ok(Self {
            name: name.into(),
            methods,
            current: 0,
        })
    }

    /// The seed whose method runs now.
    pub fn current_seed(&self) -> u64 {
        self.methods[self.current].0
    }

    fn method(&mut self) -> &mut (dyn IclMethod + 'a) {
        self.methods[self.current].1.as_mut()
    }
}

impl IclMethod for PerSeedStep<'_> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn trains(&self) -> bool {
        self.methods[0].1.trains()
    }

    fn begin_seed(&mut self, seed: u64) {
        self.current = self
            .methods
            .iter()
            .position(|(s, _)| *s == seed)
            .unwrap_or(0);
        self.method().begin_seed(seed);
    }

    fn adapt(&mut self, train: &TrainingSequences) -> Result<(), EvalError> {
        self.method().adapt(train)
    }

    fn score(&mut self, request: &ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
        self.method().score(request)
    }

    fn supports(&self, format: DemoFormat) -> bool {
        self.methods.iter().all(|(_, m)| m.supports(format))
    }

    fn train_losses(&self) -> Vec<f64> {
        self.methods[self.current].1.train_losses()
    }

    fn non_finite_origin(&mut self, request: Option<&ScoreRequest<'_>>) -> NonFiniteOrigin {
        self.method().non_finite_origin(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores `[value, 0]`: which method ran is visible in the scores.
    struct Constant(f64);

    impl IclMethod for Constant {
        fn name(&self) -> String {
            format!("constant({})", self.0)
        }
        fn trains(&self) -> bool {
            true
        }
        fn adapt(&mut self, _: &TrainingSequences) -> Result<(), EvalError> {
            Ok(())
        }
        fn score(&mut self, _: &ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
            Ok(vec![self.0, 0.0])
        }
    }

    #[test]
    fn each_seed_runs_its_own_method_and_unknown_seeds_the_first() {
        let methods: Vec<(u64, Box<dyn IclMethod>)> =
            vec![(3, Box::new(Constant(0.3))), (5, Box::new(Constant(0.5)))];
        let mut row = PerSeedStep::new("constant(per-seed)", methods).unwrap();
        let request = ScoreRequest::plain(&[1, 2], &[]);
        let score = |row: &mut PerSeedStep<'_>, seed| {
            row.begin_seed(seed);
            row.score(&request).unwrap()[0]
        };
        assert_eq!(score(&mut row, 5), 0.5);
        assert_eq!(score(&mut row, 3), 0.3);
        assert_eq!(
            score(&mut row, 0),
            0.3,
            "zero-shot's seed 0 uses the first seed's"
        );
        assert_eq!(row.current_seed(), 3);
        assert_eq!(row.name(), "constant(per-seed)");
        assert!(row.trains());

        let twice: Vec<(u64, Box<dyn IclMethod>)> =
            vec![(1, Box::new(Constant(0.1))), (1, Box::new(Constant(0.2)))];
        let Err(err) = PerSeedStep::new("x", twice) else {
            panic!("a seed given twice is refused");
        };
        assert!(err.to_string().contains("[1, 1]"), "{err}");
        assert!(PerSeedStep::new("x", Vec::new()).is_err());
    }
}
