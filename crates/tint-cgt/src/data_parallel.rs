//! Data-parallel CGT training over several devices of one process, on burn 0.21's own collective
//! machinery (burn-collective's local all-reduce through `GradientsParams::all_reduce` of burn-optim);
//! docs/cgt.md, "Data-parallel training".
//!
//! One peer per device, one thread per peer; peer 0 runs on the calling thread. Every step, peer 0
//! draws the global batch and the step's random values exactly as [`crate::train::train_with_history`]
//! does, splits both into `N` equal row shards ([`HostBatch::rows`], [`StepDraws::shard`]) and hands
//! one to every other peer. Each peer computes the loss and gradients of its shard; the loss terms and
//! then the gradients are all-reduced (mean), and every peer applies the same Adam step (clipping on
//! the reduced gradient, same schedule), so the replicas stay equal. Peer 0 writes the log and the
//! checkpoints (the same files as single-device training, so either can resume the other's run) and
//! reports progress.
//!
//! Which objectives split exactly: the shard losses carry the factor `N c_k / c` on their masked
//! means (`c_k`, `c`: scored positions of the shard and of the batch), so the mean over shards of the
//! task, auxiliary, continuity (`R_C`) and VAE KL terms is the global batch's value. The orthogonality
//! regulariser `R_D` (pairs of sequences) and the distribution-matching regulariser (batch statistics)
//! are computed per shard, over the shard's sequences only, as data parallelism does with any batch
//! statistic: with `w_D > 0` or `w_P > 0` the run is data-parallel training of a slightly different
//! objective, not the single-device one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Instant;

use burn::collective::{
    finish_collective, register, reset_collective, CollectiveConfig, PeerId, ReduceOperation,
};
use burn::module::Module;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};

use crate::data::{step_rng, BatchSource, HostBatch};
use crate::draws::StepDraws;
use crate::error::{CgtError, Result};
use crate::model::CgtModel;
use crate::objective::{joint_loss_with_draws, LossTerms};
use crate::train::{
    check_finite, log_step, open_log, optimizer_config, restore_checkpoint, save_checkpoint,
    RunFiles, StepReport, TrainOutcome, TrainingConfig, AUX_STREAM,
};

/// burn-collective keeps one local collective server per backend type for the whole process: one
/// data-parallel run at a time.
static COLLECTIVE_RUN: Mutex<()> = Mutex::new(());

/// What peer 0 hands another peer for one step.
struct Work {
    step: usize,
    batch: HostBatch,
    draws: StepDraws,
    learning_rate: f64,
}

/// Why a peer stopped.
enum PeerFailure {
    /// It failed itself.
    Own(CgtError),
    /// Another peer failed at this step (every peer learns it from the all-reduced status).
    Elsewhere(usize),
}

impl From<CgtError> for PeerFailure {
    fn from(error: CgtError) -> Self {
        Self::Own(error)
    }
}

type PeerResult<T> = std::result::Result<T, PeerFailure>;

/// Trains `model` on `source` with one data-parallel peer per entry of `devices` and returns peer 0's
/// model (on `devices[0]`) and the history, like [`crate::train::train_with_history`] (same checkpoint
/// and log files, same resume rules, `progress` called on the calling thread for the steps run now).
///
/// Every batch must split into `devices.len()` equal row shards ([`CgtError::BatchNotDivisible`]).
/// On a CPU backend the peers may share one device (`vec![device; n]`); on CUDA give one device per
/// GPU (`CudaDevice::new(i)`). With one device this is single-device training through the collective.
pub fn train_data_parallel<B: AutodiffBackend>(
    model: CgtModel<B>,
    source: &dyn BatchSource,
    config: &TrainingConfig,
    files: &RunFiles,
    devices: &[B::Device],
    progress: &mut dyn FnMut(&StepReport),
) -> Result<TrainOutcome<B>> {
    config.validate()?;
    let Some(lead_device) = devices.first() else {
        return Err(CgtError::InvalidTrainingConfig(
            "data-parallel training needs at least one device, got an empty list".into(),
        ));
    };
    let peers = devices.len();
    let batch_size = source.batch(0).batch_size;
    check_divisible(batch_size, peers, 0)?;
    let optimizer = optimizer_config(config).init::<B, CgtModel<B>>();
    let (model, optimizer, first_step) = restore_checkpoint(
        model.fork(lead_device),
        optimizer,
        files,
        config,
        batch_size,
        lead_device,
    )?;
    let (history, log) = open_log(files, first_step)?;
    if first_step >= config.steps {
        return Ok(TrainOutcome {
            model,
            history,
            resumed_at: first_step,
        });
    }
    let _run = COLLECTIVE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    // A run that died mid-way in this process would leave its peers registered.
    reset_collective::<B::InnerBackend>();
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(peers - 1);
        let mut helpers = Vec::with_capacity(peers - 1);
        for (peer, device) in devices.iter().enumerate().skip(1) {
            let (sender, receiver) = channel::<Work>();
            let replica = model.clone();
            helpers.push(scope.spawn(move || {
                helper_peer(
                    peer, peers, replica, device, config, files, batch_size, receiver,
                )
            }));
            senders.push(sender);
        }
        let lead = Lead {
            peers,
            device: lead_device,
            config,
            files,
            batch_size,
            first_step,
        };
        // `senders` moves in and is dropped when peer 0 stops, which ends the other peers' loops.
        let lead_result = lead.run(model, optimizer, source, senders, history, log, progress);
        let mut results = vec![lead_result.map(Some)];
        for (i, helper) in helpers.into_iter().enumerate() {
            results.push(match helper.join() {
                Ok(result) => result.map(|()| None),
                Err(panic) => Err(PeerFailure::Own(CgtError::Collective(format!(
                    "peer {} panicked: {}",
                    i + 1,
                    panic_message(panic.as_ref())
                )))),
            });
        }
        combine(results)
    })
}

/// Errors when `batch_size` sequences do not split into `devices` equal shards.
fn check_divisible(batch_size: usize, devices: usize, step: usize) -> Result<()> {
    if batch_size == 0 || !batch_size.is_multiple_of(devices) {
        return Err(CgtError::BatchNotDivisible {
            batch_size,
            devices,
            step,
        });
    }
    Ok(())
}

/// Peer 0's outcome, or the first error a peer raised itself (an error seen by every peer, such as a
/// non-finite loss, is reported by peer 0).
fn combine<B: AutodiffBackend>(
    results: Vec<PeerResult<Option<TrainOutcome<B>>>>,
) -> Result<TrainOutcome<B>> {
    let mut outcome = None;
    let mut elsewhere = None;
    for result in results {
        match result {
            Ok(Some(lead)) => outcome = Some(lead),
            Ok(None) => {}
            Err(PeerFailure::Own(error)) => return Err(error),
            Err(PeerFailure::Elsewhere(step)) => elsewhere = elsewhere.or(Some(step)),
        }
    }
    match (outcome, elsewhere) {
        (Some(outcome), None) => Ok(outcome),
        (_, step) => Err(CgtError::Collective(format!(
            "a peer failed at step {} without reporting why",
            step.map_or("?".into(), |s| s.to_string())
        ))),
    }
}

/// Peer 0: draws and splits every batch, trains its own shard, logs, reports and checkpoints.
struct Lead<'a, B: AutodiffBackend> {
    peers: usize,
    device: &'a B::Device,
    config: &'a TrainingConfig,
    files: &'a RunFiles,
    batch_size: usize,
    first_step: usize,
}

impl<B: AutodiffBackend> Lead<'_, B> {
    fn run<O: Optimizer<CgtModel<B>, B>>(
        &self,
        model: CgtModel<B>,
        mut optimizer: O,
        source: &dyn BatchSource,
        senders: Vec<Sender<Work>>,
        mut history: Vec<StepReport>,
        mut log: Option<std::fs::File>,
        progress: &mut dyn FnMut(&StepReport),
    ) -> PeerResult<TrainOutcome<B>> {
        let config = self.config;
        register_peer::<B>(0, self.peers, self.device)?;
        let start = Instant::now();
        let trained = (|mut model: CgtModel<B>| -> PeerResult<CgtModel<B>> {
            for step in self.first_step..config.steps {
                let step_start = Instant::now();
                let batch = source.batch(step as u64);
                check_divisible(batch.batch_size, self.peers, step)?;
                let mut rng = step_rng(config.seed ^ AUX_STREAM, step as u64);
                let draws = StepDraws::draw(&model, &batch, &config.objective, &mut rng)?;
                let learning_rate = config.learning_rate_at(step);
                // Every shard is cut before any is sent: a peer that received work must be matched
                // by peer 0 in the step's all-reduces.
                let rows = batch.batch_size / self.peers;
                let mut shards = Vec::with_capacity(self.peers);
                for peer in 0..self.peers {
                    let range = peer * rows..(peer + 1) * rows;
                    shards.push(Work {
                        step,
                        batch: batch.rows(range.clone())?,
                        draws: draws.shard(&batch, range, self.peers, config.objective.aux_horizon),
                        learning_rate,
                    });
                }
                let own = shards.remove(0);
                for (i, (sender, work)) in senders.iter().zip(shards).enumerate() {
                    sender.send(work).map_err(|_| {
                        CgtError::Collective(format!("peer {} stopped before step {step}", i + 1))
                    })?;
                }
                let (next, terms) = peer_step(0, model, &mut optimizer, &own, config, self.device)?;
                model = next;
                let report = StepReport {
                    step,
                    total_steps: config.steps,
                    learning_rate,
                    terms,
                    elapsed_s: start.elapsed().as_secs_f64(),
                    step_s: step_start.elapsed().as_secs_f64(),
                };
                log_step(&mut log, self.files, &report)?;
                progress(&report);
                history.push(report);
                let done = step + 1;
                if let Some(dir) = &self.files.checkpoint_dir {
                    let periodic =
                        config.checkpoint_every > 0 && done % config.checkpoint_every == 0;
                    if periodic || done == config.steps {
                        save_checkpoint(dir, &model, &optimizer, done, config, self.batch_size)?;
                    }
                }
            }
            Ok(model)
        })(model);
        drop(senders);
        let finished = finish_peer::<B>(0);
        let model = trained?;
        finished?;
        Ok(TrainOutcome {
            model,
            history,
            resumed_at: self.first_step,
        })
    }
}

/// Peers `1..N`: restore the same state as peer 0, then train the shards peer 0 sends until it stops.
fn helper_peer<B: AutodiffBackend>(
    peer: usize,
    peers: usize,
    model: CgtModel<B>,
    device: &B::Device,
    config: &TrainingConfig,
    files: &RunFiles,
    batch_size: usize,
    work: Receiver<Work>,
) -> PeerResult<()> {
    let optimizer = optimizer_config(config).init::<B, CgtModel<B>>();
    let setup = restore_checkpoint(
        model.fork(device),
        optimizer,
        files,
        config,
        batch_size,
        device,
    );
    register_peer::<B>(peer, peers, device)?;
    let trained = match setup {
        Ok((mut model, mut optimizer, _)) => (|| {
            while let Ok(work) = work.recv() {
                let (next, _) = peer_step(peer, model, &mut optimizer, &work, config, device)?;
                model = next;
            }
            Ok(())
        })(),
        // Peer 0 restored the same files: tell the others at the first step's status all-reduce.
        Err(error) => {
            if work.recv().is_ok() {
                let _ = all_reduce_status::<B>(peer, None, device);
            }
            Err(PeerFailure::Own(error))
        }
    };
    let finished = finish_peer::<B>(peer);
    trained?;
    finished
}

/// One step of one peer: its shard's loss and gradients, the all-reduced loss terms (a failure on
/// any peer stops every peer), the all-reduced (mean) gradients and the optimiser step.
fn peer_step<B: AutodiffBackend, O: Optimizer<CgtModel<B>, B>>(
    peer: usize,
    model: CgtModel<B>,
    optimizer: &mut O,
    work: &Work,
    config: &TrainingConfig,
    device: &B::Device,
) -> PeerResult<(CgtModel<B>, LossTerms)> {
    let local = catch_unwind(AssertUnwindSafe(|| -> Result<_> {
        let (loss, terms) =
            joint_loss_with_draws(&model, &work.batch, &config.objective, &work.draws, device)?;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        Ok((grads, terms))
    }))
    .unwrap_or_else(|panic| {
        Err(CgtError::Collective(format!(
            "peer {peer} panicked at step {}: {}",
            work.step,
            panic_message(panic.as_ref())
        )))
    });
    let (grads, own_terms) = match local {
        Ok(local) => local,
        Err(error) => {
            // Take part in the status all-reduce so that no peer waits for this one.
            let _ = all_reduce_status::<B>(peer, None, device);
            return Err(PeerFailure::Own(error));
        }
    };
    let terms = all_reduce_status::<B>(peer, Some(&own_terms), device)?
        .ok_or(PeerFailure::Elsewhere(work.step))?;
    check_finite(&terms, work.step)?;
    let grads = grads
        .all_reduce::<B::InnerBackend>(PeerId::from(peer), ReduceOperation::Mean)
        .map_err(|e| collective_error(peer, "all-reduce the gradients", e))?;
    Ok((optimizer.step(work.learning_rate, model, grads), terms))
}

/// All-reduces (mean) a failure flag and the loss terms of every peer: `None` when any peer failed
/// (or this one passes `None`), else the mean of the terms, which is the global batch's value for
/// the terms that split exactly (module docs).
fn all_reduce_status<B: AutodiffBackend>(
    peer: usize,
    terms: Option<&LossTerms>,
    device: &B::Device,
) -> PeerResult<Option<LossTerms>> {
    let values: Vec<f32> = match terms {
        Some(t) => [
            0.0,
            t.total,
            t.task,
            t.aux.unwrap_or(0.0),
            t.continuity.unwrap_or(0.0),
            t.orthogonality.unwrap_or(0.0),
            t.kl.unwrap_or(0.0),
            t.distribution.unwrap_or(0.0),
        ]
        .iter()
        .map(|&v| v as f32)
        .collect(),
        None => {
            let mut failed = vec![0.0; 8];
            failed[0] = 1.0;
            failed
        }
    };
    let status = Tensor::<B::InnerBackend, 1>::from_data(TensorData::new(values, [8]), device);
    let reduced = burn::collective::all_reduce::<B::InnerBackend>(
        PeerId::from(peer),
        status.into_primitive().tensor(),
        ReduceOperation::Mean,
    )
    .map_err(|e| collective_error(peer, "all-reduce the step status", e))?;
    let reduced = Tensor::<B::InnerBackend, 1>::from_primitive(TensorPrimitive::Float(reduced))
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map_err(|e| CgtError::Collective(format!("peer {peer}: step status: {e:?}")))?;
    let Some(t) = terms.filter(|_| reduced[0] == 0.0) else {
        return Ok(None);
    };
    let kept = |own: Option<f64>, value: f64| own.map(|_| value);
    Ok(Some(LossTerms {
        total: reduced[1],
        task: reduced[2],
        aux: kept(t.aux, reduced[3]),
        continuity: kept(t.continuity, reduced[4]),
        orthogonality: kept(t.orthogonality, reduced[5]),
        kl: kept(t.kl, reduced[6]),
        distribution: kept(t.distribution, reduced[7]),
    }))
}

/// Registers `peer` of `peers` with burn-collective's local server (on the inner backend, as burn asks
/// for autodiff backends); returns once every peer has registered.
fn register_peer<B: AutodiffBackend>(
    peer: usize,
    peers: usize,
    device: &B::Device,
) -> PeerResult<()> {
    let config = CollectiveConfig::default().with_num_devices(peers);
    register::<B::InnerBackend>(PeerId::from(peer), device.clone(), config)
        .map_err(|e| PeerFailure::Own(collective_error(peer, "register", e)))
}

fn finish_peer<B: AutodiffBackend>(peer: usize) -> PeerResult<()> {
    finish_collective::<B::InnerBackend>(PeerId::from(peer))
        .map_err(|e| PeerFailure::Own(collective_error(peer, "finish", e)))
}

fn collective_error(peer: usize, what: &str, error: burn::collective::CollectiveError) -> CgtError {
    CgtError::Collective(format!("peer {peer} could not {what}: {error:?}"))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}
