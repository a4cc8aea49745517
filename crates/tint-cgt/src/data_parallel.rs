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
//!
//! Several nodes ([`train_data_parallel_on_nodes`], [`crate::nodes`]): every node runs this same
//! training with the same settings and `D` local devices; burn-collective reduces each node's devices,
//! then all-reduces across the nodes. The global batch splits into `N · D` shards, node `r` training
//! shards `r · D .. (r + 1) · D`, and every shard loss carries the factor for `N · D` shards, so the
//! step is the same as on one node with `N · D` devices. Before the first step the peers of all nodes
//! compare their ranks and a fingerprint of their settings and resume step (one all-reduce), so a
//! duplicated rank or a node started with other settings stops every node with an error instead of
//! hanging or training apart. Every node writes its own log and checkpoints (the replicas are equal),
//! so a node resumes from its own files without a shared file system.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Instant;

use burn::collective::{
    finish_collective, register, reset_collective, CollectiveConfig, PeerId, ReduceOperation,
};
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};

use crate::data::{step_rng, BatchSource, HostBatch};
use crate::draws::StepDraws;
use crate::error::{CgtError, Result};
use crate::model::CgtModel;
use crate::nodes::NodeSetup;
use crate::objective::{joint_loss_with_draws, LossTerms};
use crate::train::{
    check_finite, lock_checkpoints, log_step, open_log, optimizer_config, restore_checkpoint,
    save_checkpoint, RunFiles, StepReport, TrainOutcome, TrainingConfig, AUX_STREAM,
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
    run_data_parallel(model, source, config, files, devices, None, progress)
}

/// [`train_data_parallel`] as node `node.rank` of `node.nodes`: this process trains its rows of every
/// global batch on its `devices` and all-reduces with the other nodes through burn-collective's global
/// all-reduce (module docs; [`crate::nodes`]). Returns once every node has trained every step.
///
/// Start [`crate::nodes::run_orchestrator`] first, then every node with the same model seed, source,
/// `config` and device count; `files` are this node's own. Every global batch must split into
/// `node.nodes · devices.len()` equal row shards.
///
/// # Errors
/// As [`train_data_parallel`]; built without the `nodes` feature
/// ([`crate::nodes::require_network`]); a bad [`NodeSetup`]; the orchestrator or another node cannot be
/// reached ([`CgtError::Collective`]); the nodes disagree on their ranks, device counts, settings or
/// resume step.
pub fn train_data_parallel_on_nodes<B: AutodiffBackend>(
    model: CgtModel<B>,
    source: &dyn BatchSource,
    config: &TrainingConfig,
    files: &RunFiles,
    devices: &[B::Device],
    node: &NodeSetup,
    progress: &mut dyn FnMut(&StepReport),
) -> Result<TrainOutcome<B>> {
    crate::nodes::require_network()?;
    node.validate()?;
    run_data_parallel(model, source, config, files, devices, Some(node), progress)
}

/// The peers of a run: this process's devices and, with several nodes, where they sit globally.
#[derive(Clone, Copy)]
struct Layout<'a> {
    /// Peers (devices) of this process.
    local: usize,
    /// This node's setup; `None` on one node.
    node: Option<&'a NodeSetup>,
}

impl Layout<'_> {
    /// Peers of every node: the number of shards of each batch.
    fn global(&self) -> usize {
        self.local * self.node.map_or(1, |n| n.nodes as usize)
    }

    /// The global shard index of local peer `peer`.
    fn shard_of(&self, peer: usize) -> usize {
        self.node.map_or(0, |n| n.rank as usize) * self.local + peer
    }
}

fn run_data_parallel<B: AutodiffBackend>(
    model: CgtModel<B>,
    source: &dyn BatchSource,
    config: &TrainingConfig,
    files: &RunFiles,
    devices: &[B::Device],
    node: Option<&NodeSetup>,
    progress: &mut dyn FnMut(&StepReport),
) -> Result<TrainOutcome<B>> {
    config.validate()?;
    let Some(lead_device) = devices.first() else {
        return Err(CgtError::InvalidTrainingConfig(
            "data-parallel training needs at least one device, got an empty list".into(),
        ));
    };
    let peers = devices.len();
    let layout = Layout { local: peers, node };
    let batch_size = source.batch(0).batch_size;
    check_divisible(batch_size, layout.global(), 0)?;
    // Held until training ends; the peers restore the same files under it.
    let _lock = lock_checkpoints(files)?;
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
    // A node that has finished still answers the others' check, which then reports the mismatch.
    if first_step >= config.steps && node.is_none() {
        return Ok(TrainOutcome {
            model,
            history,
            resumed_at: first_step,
        });
    }
    let _run = COLLECTIVE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    // A run that died mid-way in this process would leave its peers registered.
    reset_collective::<B::InnerBackend>();
    let join = Join {
        layout,
        fingerprint: settings_fingerprint(config, batch_size, first_step, layout),
    };
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(peers - 1);
        let mut helpers = Vec::with_capacity(peers - 1);
        for (peer, device) in devices.iter().enumerate().skip(1) {
            let (sender, receiver) = channel::<Work>();
            let replica = model.clone();
            helpers.push(scope.spawn(move || {
                helper_peer(
                    peer, join, replica, device, config, files, batch_size, receiver,
                )
            }));
            senders.push(sender);
        }
        let lead = Lead {
            join,
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
    join: Join<'a>,
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
        register_peer::<B>(0, &self.join, self.device)?;
        let layout = self.join.layout;
        let start = Instant::now();
        let trained = (|mut model: CgtModel<B>| -> PeerResult<CgtModel<B>> {
            for step in self.first_step..config.steps {
                let step_start = Instant::now();
                let batch = source.batch(step as u64);
                check_divisible(batch.batch_size, layout.global(), step)?;
                let mut rng = step_rng(config.seed ^ AUX_STREAM, step as u64);
                let draws = StepDraws::draw(&model, &batch, &config.objective, &mut rng)?;
                let learning_rate = config.learning_rate_at(step);
                // Every shard is cut before any is sent: a peer that received work must be matched
                // by peer 0 in the step's all-reduces.
                let rows = batch.batch_size / layout.global();
                let mut shards = Vec::with_capacity(layout.local);
                for peer in 0..layout.local {
                    let shard = layout.shard_of(peer);
                    let range = shard * rows..(shard + 1) * rows;
                    shards.push(Work {
                        step,
                        batch: batch.rows(range.clone())?,
                        draws: draws.shard(
                            &batch,
                            range,
                            layout.global(),
                            config.objective.aux_horizon,
                        ),
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
    join: Join<'_>,
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
    register_peer::<B>(peer, &join, device)?;
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
    let grads = all_reduce_gradients(&model, grads, peer)
        .map_err(|e| collective_error(peer, "all-reduce the gradients", e))?;
    Ok((optimizer.step(work.learning_rate, model, grads), terms))
}

/// All-reduces (mean) every gradient of `model`, one burn-collective all-reduce per parameter in the
/// model's visiting order.
///
/// burn-optim's `GradientsParams::all_reduce` orders the calls by parameter id, but burn draws those
/// ids at random in every process, so two nodes that build the same model order their calls apart
/// and the global all-reduce sums tensors of different parameters (it fails on the first shape
/// mismatch). The visiting order is the model's structure, the same in every process.
fn all_reduce_gradients<B: AutodiffBackend>(
    model: &CgtModel<B>,
    grads: GradientsParams,
    peer: usize,
) -> std::result::Result<GradientsParams, burn::collective::CollectiveError> {
    struct Reduce<B: AutodiffBackend> {
        grads: GradientsParams,
        peer: PeerId,
        failed: Option<burn::collective::CollectiveError>,
        _backend: std::marker::PhantomData<B>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Reduce<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if self.failed.is_some() {
                return;
            }
            // A parameter without a gradient has none on every peer (same model, same loss).
            let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id) else {
                return;
            };
            let reduced = burn::collective::all_reduce::<B::InnerBackend>(
                self.peer,
                grad.into_primitive().tensor(),
                ReduceOperation::Mean,
            );
            match reduced {
                Ok(tensor) => self.grads.register::<B::InnerBackend, D>(
                    param.id,
                    Tensor::from_primitive(TensorPrimitive::Float(tensor)),
                ),
                Err(error) => self.failed = Some(error),
            }
        }
    }
    let mut reduce = Reduce::<B> {
        grads,
        peer: PeerId::from(peer),
        failed: None,
        _backend: std::marker::PhantomData,
    };
    model.visit(&mut reduce);
    match reduce.failed {
        Some(error) => Err(error),
        None => Ok(reduce.grads),
    }
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
    let reduced = all_reduce_values::<B>(
        peer,
        values,
        ReduceOperation::Mean,
        device,
        "all-reduce the step status",
    )?;
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

/// What every peer needs to join the run.
#[derive(Clone, Copy)]
struct Join<'a> {
    layout: Layout<'a>,
    /// [`settings_fingerprint`] of this process.
    fingerprint: u32,
}

/// All-reduces a few host values through burn-collective (`what`: the purpose, for the error).
fn all_reduce_values<B: AutodiffBackend>(
    peer: usize,
    values: Vec<f32>,
    operation: ReduceOperation,
    device: &B::Device,
    what: &str,
) -> Result<Vec<f64>> {
    let len = values.len();
    let sent = Tensor::<B::InnerBackend, 1>::from_data(TensorData::new(values, [len]), device);
    let reduced = burn::collective::all_reduce::<B::InnerBackend>(
        PeerId::from(peer),
        sent.into_primitive().tensor(),
        operation,
    )
    .map_err(|e| collective_error(peer, what, e))?;
    Tensor::<B::InnerBackend, 1>::from_primitive(TensorPrimitive::Float(reduced))
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map_err(|e| CgtError::Collective(format!("peer {peer} could not {what}: {e:?}")))
}

/// Registers local peer `peer` with burn-collective (on the inner backend, as burn asks for autodiff
/// backends; with several nodes, also with the orchestrator), returns once every peer has registered
/// and, with several nodes, checks that the nodes agree ([`check_nodes_agree`]).
fn register_peer<B: AutodiffBackend>(
    peer: usize,
    join: &Join<'_>,
    device: &B::Device,
) -> PeerResult<()> {
    let local = join.layout.local;
    let config = match join.layout.node {
        None => CollectiveConfig::default().with_num_devices(local),
        Some(node) => node.collective_config(local)?,
    };
    register::<B::InnerBackend>(PeerId::from(peer), device.clone(), config)
        .map_err(|e| PeerFailure::Own(collective_error(peer, "register", e)))?;
    match join.layout.node {
        None => Ok(()),
        Some(node) => Ok(check_nodes_agree::<B>(peer, node, join, device)?),
    }
}

/// A 32-bit FNV-1a hash of everything the nodes of a run must share: the training settings, the
/// batch size, the step they start at and their layout (device count, node count).
fn settings_fingerprint(
    config: &TrainingConfig,
    batch_size: usize,
    first_step: usize,
    layout: Layout<'_>,
) -> u32 {
    let nodes = layout.node.map_or(1, |n| n.nodes);
    let text = format!(
        "{config:?}|batch {batch_size}|from step {first_step}|{} devices|{nodes} nodes",
        layout.local
    );
    text.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

/// One all-reduce (sum) over the peers of every node before the first step. Each peer sends a
/// one-hot of its node's rank and, per byte `b` of its settings fingerprint, `b` and `b²`. Every node
/// then sees the same sums: how many peers each rank has (each must have this node's device count)
/// and, per byte, whether `P · Σb² = (Σb)²` over the `P` peers, which holds exactly when every peer
/// sent the same byte (equality in Cauchy–Schwarz). The sums are integers below 2^24 for up to 256
/// peers, exact in f32. Every node reaches the same verdict, so all stop or none does.
fn check_nodes_agree<B: AutodiffBackend>(
    peer: usize,
    node: &NodeSetup,
    join: &Join<'_>,
    device: &B::Device,
) -> Result<()> {
    let nodes = node.nodes as usize;
    let mut values = vec![0.0f32; nodes + 8];
    values[node.rank as usize] = 1.0;
    for (i, byte) in join.fingerprint.to_le_bytes().into_iter().enumerate() {
        values[nodes + 2 * i] = f32::from(byte);
        values[nodes + 2 * i + 1] = f32::from(byte) * f32::from(byte);
    }
    let sums = all_reduce_values::<B>(
        peer,
        values,
        ReduceOperation::Sum,
        device,
        "compare the nodes' settings",
    )?;
    let local = join.layout.local as f64;
    let per_rank = &sums[..nodes];
    if per_rank.iter().any(|&count| count != local) {
        return Err(CgtError::Collective(format!(
            "several-node training: peers per node rank 0..{nodes} are {per_rank:?}; every rank \
             must be taken by exactly one node, and every node must have {local} devices like \
             node {} (check --node-rank, --nodes and --devices of every node)",
            node.rank
        )));
    }
    let peers = local * nodes as f64;
    let agree = (0..4).all(|i| {
        let (sum, squares) = (sums[nodes + 2 * i], sums[nodes + 2 * i + 1]);
        peers * squares == sum * sum
    });
    if !agree {
        return Err(CgtError::Collective(
            "several-node training: the nodes were started with different settings (steps, \
             schedule, objective, seed, batch size) or resume from different steps; start every \
             node with the same command apart from its rank and address, and the same checkpoints"
                .into(),
        ));
    }
    Ok(())
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
