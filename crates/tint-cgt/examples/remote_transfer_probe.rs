//! Several-node probe, second route: burn's remote backend. Several-node data-parallel training
//! could also run in one process whose peers are `RemoteDevice`s (each node running burn's server on
//! its GPU), with burn-collective's *local* all-reduce moving gradients between the servers by
//! burn-remote's server-to-server transfer. This probe checks that transfer on burn 0.21.0.
//!
//! ```text
//! cargo run -p tint-cgt --features remote-probe --example remote_transfer_probe -- [--tensors N] [--timeout-s S]
//! ```
//!
//! Two burn servers (flex) run in this process on loopback ports picked by the kernel. The probe
//! creates `N` small tensors on server 0, moves each to server 1 (`Tensor::to_device`), then creates
//! one tensor on server 1 and sums everything there, checking the exact values. It prints each stage
//! as it is reached. A stage that has not finished after `S` seconds (default 20) ends the probe with
//! exit status 1; burn's servers catch SIGTERM, so a stuck probe is otherwise hard to stop. Exit 0:
//! every stage finished with the right sum; 2: a bad argument. docs/cgt.md ("Several nodes")
//! records what it found.

// A command-line probe: its output is its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::mpsc::channel;
use std::time::Duration;

use burn::backend::remote::RemoteDevice;
use burn::backend::{Flex, RemoteBackend};
use burn::tensor::Tensor;

fn main() -> ExitCode {
    match parse(&std::env::args().skip(1).collect::<Vec<_>>()) {
        Ok((tensors, timeout)) => probe(tensors, timeout),
        Err(message) => {
            eprintln!("remote_transfer_probe: {message}");
            ExitCode::from(2)
        }
    }
}

fn parse(args: &[String]) -> Result<(usize, Duration), String> {
    let (mut tensors, mut timeout) = (3, Duration::from_secs(20));
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--tensors" => {
                tensors =
                    value.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        format!("--tensors = {value}: a whole number of at least 1")
                    })?
            }
            "--timeout-s" => {
                let s: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("--timeout-s = {value}: a positive number of seconds")
                    })?;
                timeout = Duration::from_secs_f64(s);
            }
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: [--tensors N] [--timeout-s S]"
                ))
            }
        }
    }
    Ok((tensors, timeout))
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free local port: {e}"))
}

fn probe(tensors: usize, timeout: Duration) -> ExitCode {
    let ports = match (free_port(), free_port()) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("remote_transfer_probe: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("remote_transfer_probe: no tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    for port in ports {
        runtime.spawn(burn::server::start_websocket_async::<Flex>(
            Default::default(),
            port,
        ));
    }
    // Wait until both servers listen: a client that connects first fails inside burn's runtime.
    for port in ports {
        let listening = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        if !listening {
            eprintln!("remote_transfer_probe: the server on port {port} did not start within 5 s");
            return ExitCode::from(2);
        }
    }
    println!(
        "burn remote transfer probe: 2 flex servers on 127.0.0.1 ports {} and {}, {tensors} tensors \
         moved from server 0 to server 1, timeout {:.0} s",
        ports[0],
        ports[1],
        timeout.as_secs_f64()
    );
    let (stages, reached) = channel::<String>();
    std::thread::spawn(move || {
        let say = |s: String| {
            let _ = stages.send(s);
        };
        let devices: Vec<RemoteDevice> = ports
            .iter()
            .map(|p| RemoteDevice::new(&format!("ws://127.0.0.1:{p}")))
            .collect();
        let on_0: Vec<Tensor<RemoteBackend, 1>> = (0..tensors)
            .map(|i| Tensor::from_floats([i as f32, 1.0], &devices[0]))
            .collect();
        say(format!("{tensors} tensors created on server 0"));
        let moved: Vec<Tensor<RemoteBackend, 1>> = on_0
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let t = t.to_device(&devices[1]);
                say(format!("tensor {i} moved to server 1 (queued)"));
                t
            })
            .collect();
        let fresh = Tensor::<RemoteBackend, 1>::from_floats([0.5, 0.5], &devices[1]);
        say("one tensor created on server 1".into());
        let sum = moved.into_iter().fold(fresh, |a, b| a + b);
        let got = sum.into_data().to_vec::<f32>().unwrap_or_default();
        let n = tensors as f32;
        let expected = vec![0.5 + n * (n - 1.0) / 2.0, 0.5 + n];
        say(if got == expected {
            format!("sum read back from server 1: right ({got:?})")
        } else {
            format!("sum read back from server 1: WRONG: got {got:?}, expected {expected:?}")
        });
        say("done".into());
    });
    let mut last = String::from("nothing");
    loop {
        match reached.recv_timeout(timeout) {
            Ok(stage) if stage == "done" => break,
            Ok(stage) => {
                println!("  {stage}");
                let _ = std::io::stdout().flush();
                last = stage;
            }
            Err(_) => {
                println!(
                    "result: stuck after \"{last}\" (nothing more within {:.0} s)",
                    timeout.as_secs_f64()
                );
                let _ = std::io::stdout().flush();
                // The servers keep the process alive and catch SIGTERM: leave at once.
                std::process::exit(1);
            }
        }
    }
    runtime.shutdown_background();
    if last.contains(": right") {
        println!("result: every transfer right");
        ExitCode::SUCCESS
    } else {
        println!("result: wrong values");
        ExitCode::from(1)
    }
}
