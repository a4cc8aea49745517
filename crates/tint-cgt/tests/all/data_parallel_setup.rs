//! The setup shared by the data-parallel tests (`data_parallel.rs`: several peers of one process;
//! `multinode.rs`: several node processes): a small linear-regression stream, a CGT that exercises
//! every random and masked part that must split exactly, its training settings and parameter
//! comparisons.

use std::sync::Mutex;

use burn::backend::{Autodiff, Flex};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_cgt::data::LinearRegressionConfig;
use tint_cgt::objective::ObjectiveConfig;
use tint_cgt::train::TrainingConfig;
use tint_cgt::{CgtConfig, CgtModel, InputKind};

pub(crate) type AB = Autodiff<Flex>;

/// Largest parameter difference allowed between 2-peer and single-device training after `STEPS`
/// steps. The two compute the same sums in another order: each shard's masked mean scaled by
/// `N c_k / c` and averaged by the all-reduce, against one masked mean over the batch; f32
/// reassociation changes gradients by ~1e-7 relative, and each Adam step moves a parameter by at
/// most about the learning rate (3e-3) times the relative change of `m / sqrt(v)`. 1e-5 is well
/// above that bound and far below the 1e-3-scale moves of one step.
pub(crate) const DATA_PARALLEL_TOLERANCE: f32 = 1e-5;

pub(crate) const STEPS: usize = 4;

pub(crate) fn data(batch_size: usize) -> LinearRegressionConfig {
    LinearRegressionConfig {
        d_in: 3,
        d_out: 1,
        n_pairs: 4,
        noise: 0.1,
        batch_size,
        seed: 3,
        curriculum: None,
    }
}

pub(crate) fn model(data: &LinearRegressionConfig) -> CgtModel<AB> {
    let config = CgtConfig::new(2, data.sequence_length(), 2, 16, 2)
        .with_input(InputKind::PaddedVectors(data.width()))
        .with_d_y(8)
        .with_n_heads_y(2)
        .with_readout_layer(1)
        .with_rank(2)
        .with_n_templates(2)
        .with_vae(true);
    // Seeded under a lock, so that two calls do not reseed each other. flex's random generator is
    // global to the process, though, and the crate's other tests (one test binary) draw from it at
    // the same time: the weights are the seed's only in a process that runs nothing else, the child
    // processes of multinode.rs (its nodes and its single-device reference). The tests of
    // data_parallel.rs compare clones of one start model (or a checkpoint) instead.
    static INIT: Mutex<()> = Mutex::new(());
    let _init = INIT.lock().unwrap_or_else(|e| e.into_inner());
    let device = Default::default();
    AB::seed(&device, MODEL_SEED);
    CgtModel::new(&config, &device).unwrap()
}

/// Seeds the initial weights of [`model`].
const MODEL_SEED: u64 = 11;

pub(crate) fn training() -> TrainingConfig {
    TrainingConfig {
        steps: STEPS,
        learning_rate: 3e-3,
        min_learning_rate: 3e-4,
        warmup_steps: 1,
        grad_clip_norm: Some(1.0),
        objective: ObjectiveConfig {
            eta: 0.5,
            w_continuity: 0.08,
            vae_beta: 0.01,
            vae_length_scale: 2.0,
            ..ObjectiveConfig::default()
        },
        seed: 5,
        checkpoint_every: 0,
    }
}

/// Every float parameter of a model, flattened, in visiting order.
pub(crate) struct Collect(Vec<Vec<f32>>);

impl<B: Backend> ModuleVisitor<B> for Collect {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0
            .push(param.val().into_data().convert::<f32>().to_vec().unwrap());
    }
}

pub(crate) fn parameters(model: &CgtModel<AB>) -> Vec<Vec<f32>> {
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// Largest absolute difference between the parameters of two models of one structure.
pub(crate) fn max_difference(a: &CgtModel<AB>, b: &CgtModel<AB>) -> f32 {
    max_parameter_difference(&parameters(a), &parameters(b))
}

/// Largest absolute difference between two parameter lists of one structure ([`parameters`]).
pub(crate) fn max_parameter_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f32::max)
}
