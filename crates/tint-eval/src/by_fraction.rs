//! A row whose step size was tuned per train fraction: one method per training length, each block
//! scored by the one built for its fraction's training length.

use crate::lm::LmMethod;
use crate::non_finite::NonFiniteOrigin;
use crate::perplexity::BlockNll;
use crate::EvalError;

/// One method per training length (`train_len` of a block at each train fraction), under one name.
pub struct ByTrainLen<M> {
    /// The row's name in reports.
    pub name: String,
    /// `(train_len, method)`: the method that scores blocks with that many training tokens.
    pub methods: Vec<(usize, M)>,
}

impl<M: LmMethod> ByTrainLen<M> {
    fn method(&mut self, train_len: usize) -> Result<&mut M, EvalError> {
        let known: Vec<usize> = self.methods.iter().map(|(t, _)| *t).collect();
        self.methods
            .iter_mut()
            .find(|(t, _)| *t == train_len)
            .map(|(_, m)| m)
            .ok_or_else(|| EvalError::InvalidSetting {
                name: "--train-fraction",
                value: format!("a block with {train_len} training tokens (tuned for {known:?})"),
                rule: "a row tuned per train fraction scores only the fractions it was tuned at"
                    .into(),
            })
    }
}

impl<M: LmMethod> LmMethod for ByTrainLen<M> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        self.method(train_len)?.block_nll(block, train_len)
    }

    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        match self.method(train_len) {
            Ok(m) => m.non_finite_origin(block, train_len),
            Err(_) => NonFiniteOrigin::Unknown,
        }
    }

    /// Each training length's method's settings, in order.
    fn settings(&self) -> String {
        let each: Vec<String> = self
            .methods
            .iter()
            .map(|(t, m)| format!("train_len {t}: {}", m.settings()))
            .collect();
        format!("{} [{}]", self.name, each.join("; "))
    }

    fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
        let methods = self
            .methods
            .iter()
            .map(|(t, m)| m.fork().map(|f| (*t, f)))
            .collect::<Option<Vec<_>>>()?;
        Some(Box::new(ByTrainLen {
            name: self.name.clone(),
            methods,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NLL per target = the step it was built with.
    #[derive(Clone)]
    struct Constant(f64);

    impl LmMethod for Constant {
        fn name(&self) -> String {
            "constant".into()
        }
        fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
            let count = block.len() - train_len;
            Ok(BlockNll {
                sum_nll: self.0 * count as f64,
                count,
            })
        }
        fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
            Some(Box::new(self.clone()))
        }
    }

    #[test]
    fn each_training_length_is_scored_by_its_own_method() {
        let mut row = ByTrainLen {
            name: "dyn-eval".into(),
            methods: vec![(3, Constant(1.0)), (5, Constant(2.0))],
        };
        let block = vec![0u32; 10];
        assert_eq!(row.block_nll(&block, 3).unwrap().sum_nll, 7.0);
        assert_eq!(row.block_nll(&block, 5).unwrap().sum_nll, 10.0);
        {
            let mut fork = row.fork().expect("every method forks");
            assert_eq!(fork.block_nll(&block, 5).unwrap().sum_nll, 10.0);
            assert_eq!(fork.name(), "dyn-eval");
        }
        let err = row.block_nll(&block, 7).unwrap_err().to_string();
        assert!(
            err.contains("7 training tokens") && err.contains("[3, 5]"),
            "{err}"
        );
    }
}
