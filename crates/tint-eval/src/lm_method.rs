//! [`LmMethod`]: how a method scores the evaluated part of a block, possibly after adapting to its
//! training part; what the LM evaluation (`crate::lm`) and its worker threads (`crate::lm_workers`)
//! both drive.

use crate::non_finite::NonFiniteOrigin;
use crate::perplexity::BlockNll;
use crate::EvalError;

/// A way of scoring the evaluated part of a block, possibly after adapting to its training part.
pub trait LmMethod {
    /// Name in reports (`vanilla`, `dyn-eval`, `tint`, `tint-ref`).
    fn name(&self) -> String;
    /// Summed NLL of targets `train_len .. block.len()-1` given the whole block as context.
    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError>;
    /// Where a non-finite NLL of [`LmMethod::block_nll`] on this block came from (asked only after
    /// one, so it may recompute; the default does not know).
    fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
        let _ = (block, train_len);
        NonFiniteOrigin::Unknown
    }
    /// Another instance that gives the same NLLs (sharing this one's weights), so that blocks can
    /// be scored on several threads ([`crate::lm_workers`]); `None` (the default): this method
    /// scores its blocks one at a time.
    fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
        None
    }
    /// Everything besides the blocks that sets this method's numbers (its kind, step sizes,
    /// steps, trained parameters), in words: part of each cell's input digest
    /// ([`crate::lm::cell_inputs_sha256`]), so a stored cell made with other settings is not reused. The
    /// default: the name.
    fn settings(&self) -> String {
        self.name()
    }
}

/// `LmMethod` for a pointer to one (`&mut M`, `Box<M>`): every call goes to the method it points
/// at (written once for both pointers).
macro_rules! forward_lm_method {
    ($($pointer:ty),+) => {$(
        impl<M: LmMethod + ?Sized> LmMethod for $pointer {
            fn name(&self) -> String {
                (**self).name()
            }
            fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
                (**self).block_nll(block, train_len)
            }
            fn non_finite_origin(&mut self, block: &[u32], train_len: usize) -> NonFiniteOrigin {
                (**self).non_finite_origin(block, train_len)
            }
            fn fork(&self) -> Option<Box<dyn LmMethod + Send + '_>> {
                (**self).fork()
            }
            fn settings(&self) -> String {
                (**self).settings()
            }
        }
    )+};
}

forward_lm_method!(&mut M, Box<M>);
