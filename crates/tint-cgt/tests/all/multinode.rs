//! Data-parallel training over several nodes (issue 18 item 4): burn's global orchestrator and two
//! node processes on 127.0.0.1, each node one flex peer training its half of every batch through
//! burn-collective's global all-reduce, end with the parameters of single-device training on the
//! whole batch. Nodes that claim one rank, or were started with other settings, stop with an error
//! instead of hanging.
//!
//! The orchestrator and the nodes are this test binary run again (`node_process`, ignored in normal
//! runs), so the test needs no other binary. Every child is killed when its test ends or after
//! [`DEADLINE`], and a test that times out names the process that hung and shows its output.
//!
//! The single-device reference is trained in a child process too: the nodes and the reference must
//! start from the same seeded weights, and flex's random generator is global to a process, where the
//! crate's other tests (one test binary, `main.rs`) draw from it at the same time.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::data_parallel_setup::{
    data, max_parameter_difference, model, parameters, training, DATA_PARALLEL_TOLERANCE, STEPS,
};
use burn::collective::AllReduceStrategy;
use tint_cgt::nodes::{run_orchestrator, NodeSetup};
use tint_cgt::train::{train_with_history, RunFiles};
use tint_cgt::train_data_parallel_on_nodes;

/// The longest a node may take: 4 steps of a 2-layer model take well under a second, registration a
/// few; far above that is a hang.
const DEADLINE: Duration = Duration::from_secs(120);

/// Environment variable naming the role of a child process.
const ROLE: &str = "TINT_MULTINODE_ROLE";

/// A free TCP port of 127.0.0.1 (the kernel's choice; released for the child to bind).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Entry point of the child processes (orchestrator, node or the single-device reference),
/// selected by the environment.
#[test]
#[ignore = "entry point of the processes that the multinode tests start"]
fn node_process() {
    let env = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    match env(ROLE).as_str() {
        "orchestrator" => run_orchestrator(env("TINT_PORT").parse().unwrap()).unwrap(),
        "node" => {
            let setup = NodeSetup {
                strategy: match env("TINT_STRATEGY").as_str() {
                    "ring" => AllReduceStrategy::Ring,
                    "tree" => AllReduceStrategy::Tree(2),
                    "centralized" => AllReduceStrategy::Centralized,
                    other => panic!("unknown strategy {other}"),
                },
                ..NodeSetup::new(
                    env("TINT_RANK").parse().unwrap(),
                    2,
                    format!("ws://127.0.0.1:{}", env("TINT_ORCHESTRATOR_PORT")),
                    format!("ws://127.0.0.1:{}", env("TINT_PORT")),
                )
            };
            let mut training = training();
            training.seed = env("TINT_SEED").parse().unwrap();
            let data = data(4);
            let mut steps = 0;
            let outcome = train_data_parallel_on_nodes(
                model(&data),
                &data,
                &training,
                &RunFiles::default(),
                &vec![Default::default(); env("TINT_DEVICES").parse().unwrap()],
                &setup,
                &mut |_| steps += 1,
            );
            let out = PathBuf::from(env("TINT_OUT"));
            match outcome {
                Ok(outcome) => {
                    assert_eq!(steps, STEPS);
                    let json = serde_json::to_string(&parameters(&outcome.model)).unwrap();
                    std::fs::write(out, json).unwrap();
                }
                Err(error) => {
                    std::fs::write(out.with_extension("error"), error.to_string()).unwrap()
                }
            }
        }
        "single" => {
            let data = data(4);
            let start = model(&data);
            let single = train_with_history(
                start.clone(),
                &data,
                &training(),
                &RunFiles::default(),
                &Default::default(),
                &mut |_| {},
            )
            .unwrap();
            let json = serde_json::to_string(&[parameters(&start), parameters(&single.model)]);
            std::fs::write(env("TINT_OUT"), json.unwrap()).unwrap();
        }
        other => panic!("unknown {ROLE} {other}"),
    }
}

/// The name of [`node_process`] in the test harness: its module path without the crate (the test
/// target), `multinode::node_process` in the crate's one test binary.
fn node_process_name() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_, module)| module);
    format!("{module}::node_process")
        .trim_start_matches("::")
        .into()
}

/// A child process, killed when dropped.
struct Process {
    name: String,
    child: Child,
    /// Its stdout and stderr.
    log: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts this binary's `node_process` with `env`, its output going to `log` (a file, not a
    /// pipe that a talkative child could fill).
    fn start(name: &str, log: PathBuf, env: &[(&str, String)]) -> Self {
        let file = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", &node_process_name(), "--ignored", "--nocapture"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        for (key, value) in env {
            command.env(key, value);
        }
        Self {
            name: name.into(),
            child: command.spawn().unwrap(),
            log,
        }
    }

    /// Waits until the process exits (its status must be success) or the deadline passes (panics
    /// with the last lines of every process's log).
    fn finish(mut self, deadline: Instant) {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{} failed:\n{}", self.name, self.logs());
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} did not finish within {DEADLINE:?} (a hang):\n{}",
                    self.name,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the logs of this run's processes (all write to one folder).
    fn logs(&self) -> String {
        logs_tail(self.log.parent().expect("logs lie in the run's folder"))
    }
}

/// Runs an orchestrator and two nodes with these ranks and seeds, `devices` flex peers each and
/// `strategy` (ring, tree, centralized) across the nodes; returns each node's output file
/// (its parameters as JSON, or `<file>.error` with the error it stopped with).
fn run_two_nodes(
    dir: &Path,
    devices: usize,
    strategy: &str,
    nodes: [(u32, u64); 2],
) -> Vec<PathBuf> {
    let orchestrator_port = free_port();
    let _orchestrator = Process::start(
        "the orchestrator",
        dir.join("orchestrator.log"),
        &[
            (ROLE, "orchestrator".into()),
            ("TINT_PORT", orchestrator_port.to_string()),
        ],
    );
    let deadline = Instant::now() + DEADLINE;
    let mut outputs = Vec::new();
    let mut processes = Vec::new();
    for (i, (rank, seed)) in nodes.into_iter().enumerate() {
        let out = dir.join(format!("node{i}.json"));
        processes.push(Process::start(
            &format!("node {i} (rank {rank})"),
            dir.join(format!("node{i}.log")),
            &[
                (ROLE, "node".into()),
                ("TINT_RANK", rank.to_string()),
                ("TINT_SEED", seed.to_string()),
                ("TINT_DEVICES", devices.to_string()),
                ("TINT_STRATEGY", strategy.to_string()),
                ("TINT_PORT", free_port().to_string()),
                ("TINT_ORCHESTRATOR_PORT", orchestrator_port.to_string()),
                ("TINT_OUT", out.display().to_string()),
            ],
        ));
        outputs.push(out);
    }
    for process in processes {
        process.finish(deadline);
    }
    outputs
}

/// The last lines of every process's log in `dir` (a node that failed may have been stopped by
/// its peer's panic: both logs name the first cause).
fn logs_tail(dir: &Path) -> String {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    names.retain(|path| path.extension().is_some_and(|e| e == "log"));
    names.sort();
    let mut tails = String::new();
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        tails += &format!("--- last lines of {}:\n{tail}\n", path.display());
    }
    tails
}

/// The parameters of [`model`] before and after single-device training on the whole batch, computed
/// in a child process (the module documentation says why).
fn single_device_reference(dir: &Path) -> [Vec<Vec<f32>>; 2] {
    let out = dir.join("single.json");
    Process::start(
        "the single-device reference",
        dir.join("single.log"),
        &[
            (ROLE, "single".into()),
            ("TINT_OUT", out.display().to_string()),
        ],
    )
    .finish(Instant::now() + DEADLINE);
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-cgt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn two_nodes_reach_the_parameters_of_single_device_training_on_the_global_batch() {
    two_nodes_match_single_device(1, "ring");
}

/// Each node reduces its own two peers first, then the nodes all-reduce: 4 shards of 1 sequence.
#[test]
fn two_nodes_of_two_devices_reach_the_parameters_of_single_device_training() {
    two_nodes_match_single_device(2, "ring");
}

/// burn's other two strategies across nodes (ring is the default, above).
#[test]
fn the_tree_and_centralized_strategies_across_nodes_train_alike() {
    for strategy in ["tree", "centralized"] {
        two_nodes_match_single_device(1, strategy);
    }
}

fn two_nodes_match_single_device(devices: usize, strategy: &str) {
    let dir = scratch(&format!("two-nodes-{devices}-devices-{strategy}"));
    let seed = training().seed;
    let outputs = run_two_nodes(&dir, devices, strategy, [(0, seed), (1, seed)]);
    let [start, single] = single_device_reference(&dir);
    let moved = max_parameter_difference(&start, &single);
    // Training moved the parameters by far more than the tolerance: the comparison is not vacuous.
    assert!(moved > 100.0 * DATA_PARALLEL_TOLERANCE, "moved {moved:e}");
    let mut nodes = Vec::new();
    for out in &outputs {
        let text = std::fs::read_to_string(out).unwrap_or_else(|_| {
            panic!(
                "{} is missing; the node said: {}\n{}",
                out.display(),
                std::fs::read_to_string(out.with_extension("error")).unwrap_or_default(),
                logs_tail(&dir)
            )
        });
        let node: Vec<Vec<f32>> = serde_json::from_str(&text).unwrap();
        // The same tolerance and reason as two peers of one process (data_parallel_setup): the
        // shards' sums in another order.
        let difference = max_parameter_difference(&node, &single);
        assert!(
            difference < DATA_PARALLEL_TOLERANCE,
            "{}: 2 nodes of {devices} devices ({strategy}) vs 1 device after {STEPS} steps: max parameter \
             difference {difference:e} (training moved them by up to {moved:e})",
            out.display()
        );
        nodes.push(node);
    }
    // Both nodes apply the same all-reduced gradients to the same weights: identical replicas.
    assert_eq!(max_parameter_difference(&nodes[0], &nodes[1]), 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nodes_that_disagree_stop_with_an_error_instead_of_hanging() {
    let seed = training().seed;
    for (case, nodes, expected) in [
        (
            "one rank twice",
            [(0, seed), (0, seed)],
            "peers per node rank",
        ),
        (
            "other seeds",
            [(0, seed), (1, seed + 1)],
            "different settings",
        ),
    ] {
        let dir = scratch(&format!("disagree-{}", case.replace(' ', "-")));
        for out in run_two_nodes(&dir, 1, "ring", nodes) {
            let error = std::fs::read_to_string(out.with_extension("error"))
                .unwrap_or_else(|_| panic!("{case}: {} trained anyway", out.display()));
            assert!(error.contains(expected), "{case}: {error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
