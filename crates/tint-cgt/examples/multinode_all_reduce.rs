//! Several-node probe: does burn 0.21's *global* all-reduce (burn-collective across processes, the
//! piece that several-node data-parallel training stands on) return the right sums when it is
//! called more than once? Data-parallel training calls it once per parameter tensor and step.
//! Published burn-collective 0.21.0 hangs from the second call; the workspace carries it with that
//! mended (vendor/README.md), so this probe now runs against the mended copy. Remove the
//! `[patch.crates-io]` entry of the workspace's Cargo.toml to probe the published crate.
//!
//! Run on one machine (every process on 127.0.0.1, flex backend):
//!
//! ```text
//! cargo run -p tint-cgt --example multinode_all_reduce -- [--calls N] [--strategy ring|tree|centralized]
//!     [--pause-ms MS] [--timeout-s S] [--verbose]
//! ```
//!
//! The driver starts burn's global orchestrator and two nodes as child processes of this same
//! binary (free ports picked by the kernel). Each node registers one device with
//! `with_num_nodes(2)`, then makes `N` all-reduce (sum) calls one after the other. Call `k` sends
//! `k + 2` values, `(node + 1) · (k + 1) + i`, so every call has its own shape and values, and the
//! node checks the exact sum (f32 sums of small integers: no rounding). `--pause-ms` waits between a
//! node's calls (does the failure depend on timing?). A node prints each call as it
//! starts and how it ended; the driver stops the nodes after `S` seconds (default 60) and reports,
//! per node, the last call that was right and what happened to the next one (`--verbose` also shows
//! burn's own log lines).
//!
//! Exit status: 0 when every call of both nodes was right, 1 otherwise (a wrong sum, an error or a
//! hang), 2 for a bad argument. docs/cgt.md ("Several nodes") records what it found on burn 0.21.0.

// A command-line probe: its output is its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, Command, ExitCode, Stdio};
use std::str::FromStr;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use burn::backend::Flex;
use burn::collective::{
    all_reduce, register, AllReduceStrategy, CollectiveConfig, PeerId, ReduceOperation,
};
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_collective::start_global_orchestrator;
use burn_communication::Address;

const NODES: u32 = 2;

const USAGE: &str =
    "[--calls N] [--strategy ring|tree|centralized] [--pause-ms MS] [--timeout-s S] [--verbose]";

/// Marks the nodes' own lines on their stdout (burn's log lines go there too).
const PROBE_PREFIX: &str = "probe: ";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--orchestrator") => orchestrator(&args[1..]),
        Some("--node") => node(&args[1..]),
        _ => driver(&args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("multinode_all_reduce: {message}");
            ExitCode::from(2)
        }
    }
}

/// The settings of a probe run.
struct Probe {
    calls: usize,
    pause: Duration,
    verbose: bool,
    strategy: String,
    timeout: Duration,
}

fn parse_probe(args: &[String]) -> Result<Probe, String> {
    let mut probe = Probe {
        calls: 4,
        pause: Duration::ZERO,
        verbose: false,
        strategy: "ring".into(),
        timeout: Duration::from_secs(60),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value"))
                .cloned()
        };
        match flag.as_str() {
            "--calls" => {
                let v = value()?;
                probe.calls = v
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| format!("--calls = {v}: a whole number of at least 1"))?;
            }
            "--pause-ms" => {
                let v = value()?;
                let ms: u64 = v
                    .parse()
                    .map_err(|_| format!("--pause-ms = {v}: a whole number of milliseconds"))?;
                probe.pause = Duration::from_millis(ms);
            }
            "--verbose" => probe.verbose = true,
            "--strategy" => {
                let v = value()?;
                strategy(&v)?;
                probe.strategy = v;
            }
            "--timeout-s" => {
                let v = value()?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("--timeout-s = {v}: a positive number of seconds"))?;
                probe.timeout = Duration::from_secs_f64(s);
            }
            other => return Err(format!("unknown argument {other}; usage: {USAGE}")),
        }
    }
    Ok(probe)
}

fn strategy(name: &str) -> Result<AllReduceStrategy, String> {
    match name {
        "ring" => Ok(AllReduceStrategy::Ring),
        "tree" => Ok(AllReduceStrategy::Tree(2)),
        "centralized" => Ok(AllReduceStrategy::Centralized),
        other => Err(format!(
            "--strategy = {other}: one of ring, tree, centralized"
        )),
    }
}

/// A port the kernel reports free now (bound and released; the children bind it a moment later).
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free local port: {e}"))
}

/// The children's stderr: shown with `--verbose`. Otherwise dropped, because stopping a hung node
/// makes burn's websocket tasks in the other processes panic ("ResetWithoutClosingHandshake"),
/// which says nothing about the calls.
fn child_stderr(verbose: bool) -> Stdio {
    if verbose {
        Stdio::inherit()
    } else {
        Stdio::null()
    }
}

/// What one node reported: its lines, and whether it ended by itself.
struct NodeReport {
    lines: Vec<String>,
    exited: Option<std::process::ExitStatus>,
}

fn driver(args: &[String]) -> Result<ExitCode, String> {
    let probe = parse_probe(args)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let orchestrator_port = free_port()?;
    println!(
        "burn global all-reduce probe: {NODES} nodes on 127.0.0.1, {} calls each ({} ms apart), \
         global strategy {}, orchestrator on port {orchestrator_port}, timeout {:.0} s",
        probe.calls,
        probe.pause.as_millis(),
        probe.strategy,
        probe.timeout.as_secs_f64()
    );
    let mut orchestrator = Command::new(&exe)
        .args(["--orchestrator", &orchestrator_port.to_string()])
        .stdout(Stdio::null())
        .stderr(child_stderr(probe.verbose))
        .spawn()
        .map_err(|e| format!("cannot start the orchestrator: {e}"))?;
    std::thread::sleep(Duration::from_millis(500));

    let (sender, receiver) = channel::<(u32, Option<String>)>();
    let mut nodes: Vec<Child> = Vec::new();
    for node in 0..NODES {
        let data_port = free_port()?;
        let mut child = Command::new(&exe)
            .args([
                "--node",
                &node.to_string(),
                &orchestrator_port.to_string(),
                &data_port.to_string(),
                &probe.calls.to_string(),
                &probe.strategy,
                &probe.pause.as_millis().to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(child_stderr(probe.verbose))
            .spawn()
            .map_err(|e| format!("cannot start node {node}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let sender = sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                let _ = sender.send((node, Some(line)));
            }
            let _ = sender.send((node, None));
        });
        nodes.push(child);
    }
    drop(sender);

    let deadline = Instant::now() + probe.timeout;
    let mut reports: Vec<NodeReport> = (0..NODES)
        .map(|_| NodeReport {
            lines: Vec::new(),
            exited: None,
        })
        .collect();
    let mut open = NODES;
    while open > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left) {
            Ok((node, Some(line))) => {
                if let Some(own) = line.strip_prefix(PROBE_PREFIX) {
                    println!("  node {node}: {own}");
                    reports[node as usize].lines.push(own.to_string());
                } else if probe.verbose {
                    println!("  node {node} (burn): {line}");
                }
            }
            Ok((_, None)) => open -= 1,
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // A node that closed its stdout may not have been reaped yet: wait for it up to the deadline
    // before calling it hung.
    for (node, child) in nodes.iter_mut().enumerate() {
        reports[node].exited = wait_until(child, deadline);
        if reports[node].exited.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    let _ = orchestrator.kill();
    let _ = orchestrator.wait();

    let mut all_right = true;
    for (node, report) in reports.iter().enumerate() {
        let right = report
            .lines
            .iter()
            .filter(|l| l.contains(": right"))
            .count();
        let ended = match report.exited {
            Some(status) if status.success() => "exited".to_string(),
            Some(status) => format!("exited with {status}"),
            None => format!(
                "did not finish within {:.0} s and was stopped (hung)",
                probe.timeout.as_secs_f64()
            ),
        };
        let last = report
            .lines
            .last()
            .map(String::as_str)
            .unwrap_or("no output");
        println!(
            "node {node}: {right} of {} calls right; {ended}; last line: {last}",
            probe.calls
        );
        all_right &= right == probe.calls && report.exited.is_some_and(|s| s.success());
    }
    let _ = std::io::stdout().flush();
    Ok(if all_right {
        println!("result: every call right");
        ExitCode::SUCCESS
    } else {
        println!("result: the global all-reduce failed (see the nodes' lines above)");
        ExitCode::from(1)
    })
}

/// The child's exit status if it exits by `deadline`, `None` if it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

fn orchestrator(args: &[String]) -> Result<ExitCode, String> {
    let port: u16 = args
        .first()
        .and_then(|p| p.parse().ok())
        .ok_or("--orchestrator needs a port")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no tokio runtime: {e}"))?;
    runtime.block_on(start_global_orchestrator(port));
    Ok(ExitCode::SUCCESS)
}

fn node(args: &[String]) -> Result<ExitCode, String> {
    let [node, orchestrator_port, data_port, calls, strategy_name, pause_ms] = args else {
        return Err(
            "--node needs: node orchestrator-port data-port calls strategy pause-ms".into(),
        );
    };
    fn parse<T: FromStr>(what: &str, v: &str) -> Result<T, String> {
        v.parse()
            .map_err(|_| format!("--node: {what} = {v} is not a number in range"))
    }
    let node: u32 = parse("node", node)?;
    let orchestrator_port: u16 = parse("orchestrator port", orchestrator_port)?;
    let data_port: u16 = parse("data port", data_port)?;
    let calls: usize = parse("calls", calls)?;
    let global_strategy = strategy(strategy_name)?;
    let pause = Duration::from_millis(parse("pause", pause_ms)?);
    let address = |port: u16| {
        Address::from_str(&format!("ws://127.0.0.1:{port}")).expect("Address parses any string")
    };
    let config = CollectiveConfig::default()
        .with_num_devices(1)
        .with_num_nodes(NODES)
        .with_global_address(address(orchestrator_port))
        .with_node_address(address(data_port))
        .with_data_service_port(data_port)
        .with_global_all_reduce_strategy(global_strategy);
    let device = Default::default();
    let say = |line: String| {
        println!("{PROBE_PREFIX}{line}");
        let _ = std::io::stdout().flush();
    };
    if let Err(e) = register::<Flex>(PeerId::from(0), device, config) {
        say(format!("register failed: {e:?}"));
        return Ok(ExitCode::from(1));
    }
    say("registered".into());
    let mut all_right = true;
    for k in 0..calls {
        if k > 0 {
            std::thread::sleep(pause);
        }
        let len = k + 2;
        let value = |n: u32, i: usize| ((n + 1) as usize * (k + 1) + i) as f32;
        let own: Vec<f32> = (0..len).map(|i| value(node, i)).collect();
        let expected: Vec<f32> = (0..len)
            .map(|i| (0..NODES).map(|n| value(n, i)).sum())
            .collect();
        let tensor = Tensor::<Flex, 1>::from_data(TensorData::new(own, [len]), &device);
        say(format!("call {k}: started ({len} values)"));
        let started = Instant::now();
        match all_reduce::<Flex>(
            PeerId::from(0),
            tensor.into_primitive().tensor(),
            ReduceOperation::Sum,
        ) {
            Ok(sum) => {
                let got = Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(sum))
                    .into_data()
                    .to_vec::<f32>()
                    .unwrap_or_default();
                let ms = started.elapsed().as_secs_f64() * 1e3;
                if got == expected {
                    say(format!("call {k}: right in {ms:.0} ms"));
                } else {
                    all_right = false;
                    say(format!(
                        "call {k}: WRONG in {ms:.0} ms: got {got:?}, expected {expected:?}"
                    ));
                }
            }
            Err(e) => {
                all_right = false;
                say(format!("call {k}: error {e:?}"));
                break;
            }
        }
    }
    // No `finish_collective`: it would wait on the other node, and a hung peer must not hide the
    // answers already printed.
    Ok(if all_right {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
