//! No silent NaN: finiteness checks of outputs, and the search for where a non-finite value came from
//! (a weight of the checkpoint; config values are validated when the config is read).

use burn::module::Param;
use burn::tensor::{backend::Backend, Tensor};

use crate::params::{ParamInfo, ParamMapper};
use crate::weight_file::WeightFile;
use crate::{AuxError, AuxModel};

/// Number of NaN or infinite values of `tensor`, and its number of values (read on the host).
pub fn count_non_finite<B: Backend, const D: usize>(tensor: &Tensor<B, D>) -> (usize, usize) {
    let data = tensor.to_data().convert::<f64>();
    let values = data.as_slice::<f64>().unwrap_or(&[]);
    (
        values.iter().filter(|v| !v.is_finite()).count(),
        values.len(),
    )
}

/// Errors with [`AuxError::NonFinite`] when `tensor` holds a NaN or an infinity; `what` names the
/// output and `cause` is asked (only then) where the first non-finite value came from.
///
/// # Errors
/// [`AuxError::NonFinite`].
pub fn check_finite<B: Backend, const D: usize>(
    tensor: &Tensor<B, D>,
    what: &str,
    cause: impl FnOnce() -> Option<String>,
) -> Result<(), AuxError> {
    let (count, total) = count_non_finite(tensor);
    if count == 0 {
        return Ok(());
    }
    Err(AuxError::NonFinite {
        what: what.to_string(),
        count,
        total,
        cause: cause(),
    })
}

/// The first parameter (in the model's visiting order) holding a NaN or an infinity, described as
/// `` weight `NAME` in FILE (k of n values non-finite) `` with the file's own tensor name
/// ([`WeightFile::describe`]; our parameter path for a model built in memory), or `None` when every
/// weight is finite.
pub fn first_non_finite_weight<B: Backend>(model: &AuxModel<B>) -> Option<String> {
    struct Finder<'a>(Option<String>, &'a WeightFile);
    impl<B: Backend> ParamMapper<B> for Finder<'_> {
        fn map<const D: usize>(
            &mut self,
            info: &ParamInfo,
            param: Param<Tensor<B, D>>,
        ) -> Param<Tensor<B, D>> {
            if self.0.is_none() {
                let (count, total) = count_non_finite(&param.val());
                if count > 0 {
                    self.0 = Some(format!(
                        "weight {} ({count} of {total} values non-finite)",
                        self.1.describe(&info.name)
                    ));
                }
            }
            param
        }
    }
    let mut finder = Finder(None, model.weight_file());
    let _ = model.clone().map_named_params(&mut finder);
    finder.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::TensorData;

    #[test]
    fn counts_nan_and_infinities() {
        let device = Default::default();
        let t = Tensor::<Flex, 1>::from_data(
            TensorData::new(
                vec![1.0f32, f32::NAN, f32::INFINITY, -f32::INFINITY, 0.0],
                [5],
            ),
            &device,
        );
        assert_eq!(count_non_finite(&t), (3, 5));
        let err = check_finite(&t, "logits", || Some("weight w".to_string())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "non-finite values (3 of 5) in logits: weight w"
        );
        let fine = Tensor::<Flex, 1>::from_data(TensorData::new(vec![1.0f32, -2.0], [2]), &device);
        check_finite(&fine, "logits", || unreachable!("asked only on failure")).unwrap();
    }
}
