//! Several nodes of one data-parallel run: where this process sits among them ([`NodeSetup`]: its
//! rank, the orchestrator's address, the address of its own data service) and burn's global
//! orchestrator ([`run_orchestrator`]). The training itself is
//! [`crate::data_parallel::train_data_parallel_on_nodes`]; docs/cgt.md, "Several nodes".
//!
//! burn-collective's global all-reduce connects the nodes: every node registers with one
//! orchestrator (a small websocket server that only tells the nodes about each other) and runs a
//! data service through which the nodes exchange tensors directly. burn 0.21.0 as published hangs
//! from the second global all-reduce on; the workspace carries burn-collective with that mended
//! (vendor/README.md).

use std::net::TcpListener;
use std::str::FromStr;

use burn::collective::{AllReduceStrategy, CollectiveConfig};
use burn_communication::Address;

use crate::error::{CgtError, Result};

/// This process's place in a data-parallel run over several nodes (processes, usually machines).
///
/// Every node runs the same training with the same settings and the same number of local devices
/// `D`. With `N` nodes the global batch splits into `N · D` equal row shards; node `rank` trains
/// shards `rank · D .. (rank + 1) · D`, one per local device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSetup {
    /// This node's rank, `0..nodes`; every rank is taken by exactly one node.
    pub rank: u32,
    /// How many nodes the run has.
    pub nodes: u32,
    /// The orchestrator's address, `ws://host:port` ([`run_orchestrator`] on `port`).
    pub orchestrator: String,
    /// The address at which the other nodes reach this node's data service, `ws://host:port`; the
    /// service listens on that port on every interface of this machine.
    pub address: String,
    /// How the nodes all-reduce among themselves (each node first reduces its own devices).
    pub strategy: AllReduceStrategy,
}

impl NodeSetup {
    /// A node of `nodes` with burn's default strategy across nodes (ring).
    pub fn new(
        rank: u32,
        nodes: u32,
        orchestrator: impl Into<String>,
        address: impl Into<String>,
    ) -> Self {
        Self {
            rank,
            nodes,
            orchestrator: orchestrator.into(),
            address: address.into(),
            strategy: AllReduceStrategy::Ring,
        }
    }

    /// Checks the rank and both addresses.
    ///
    /// # Errors
    /// [`CgtError::InvalidTrainingConfig`] naming the field, the rule and the value: no nodes, a rank
    /// not below the node count, an address that is not `ws://host:port` (or `wss://`), or a tree
    /// strategy of arity below 2.
    pub fn validate(&self) -> Result<()> {
        self.validated_data_port().map(drop)
    }

    /// [`Self::validate`], returning the port of this node's address (its data service's).
    fn validated_data_port(&self) -> Result<u16> {
        let invalid = |what: String| Err(CgtError::InvalidTrainingConfig(what));
        if self.nodes == 0 {
            return invalid("several-node training: nodes must be at least 1, got 0".into());
        }
        if self.rank >= self.nodes {
            return invalid(format!(
                "several-node training: the node rank must be below the node count ({}), got {}",
                self.nodes, self.rank
            ));
        }
        if let AllReduceStrategy::Tree(arity) = self.strategy {
            if arity < 2 {
                return invalid(format!(
                    "several-node training: a tree all-reduce needs an arity of at least 2, got {arity}"
                ));
            }
        }
        port_of("orchestrator address", &self.orchestrator)?;
        port_of("node address", &self.address)
    }

    /// burn-collective's configuration for this node with `local_devices` devices.
    ///
    /// # Errors
    /// As [`Self::validate`].
    pub fn collective_config(&self, local_devices: usize) -> Result<CollectiveConfig> {
        let data_port = self.validated_data_port()?;
        let address = |s: &str| Address::from_str(s).expect("burn's Address accepts any string");
        Ok(CollectiveConfig::default()
            .with_num_devices(local_devices)
            .with_num_nodes(self.nodes)
            .with_global_address(address(&self.orchestrator))
            .with_node_address(address(&self.address))
            .with_data_service_port(data_port)
            .with_global_all_reduce_strategy(self.strategy))
    }
}

/// The port of a `ws://host:port` or `wss://host:port` address (a trailing `/` is allowed).
fn port_of(what: &str, address: &str) -> Result<u16> {
    let error = |rule: &str| {
        Err(CgtError::InvalidTrainingConfig(format!(
            "several-node training: {what} {address:?} {rule}; expected ws://host:port"
        )))
    };
    let Some(rest) = address
        .strip_prefix("ws://")
        .or_else(|| address.strip_prefix("wss://"))
    else {
        return error("does not start with ws:// or wss://");
    };
    let authority = rest.trim_end_matches('/');
    let Some((host, port)) = authority.rsplit_once(':') else {
        return error("has no port");
    };
    if host.is_empty() || authority.contains('/') {
        return error("has no host, or a path after it");
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => error("has no port in 1..=65535"),
    }
}

/// Runs burn's global orchestrator on `port` (every interface) until the process is interrupted
/// (Ctrl-C or SIGTERM): the rendezvous of the nodes of several-node runs. One orchestrator serves
/// one run at a time.
///
/// # Errors
/// The port is 0 (the system would pick one that the nodes could not be told), cannot be bound
/// (in use, or not permitted), or no async runtime could be started.
pub fn run_orchestrator(port: u16) -> Result<()> {
    require_network()?;
    if port == 0 {
        return Err(CgtError::Collective(
            "the orchestrator's port must be in 1..=65535, got 0 (port 0 lets the system pick one \
             that the nodes' --orchestrator address could not name)"
                .into(),
        ));
    }
    // burn logs a failed bind and returns; check first so that the caller gets the reason.
    drop(TcpListener::bind(("0.0.0.0", port)).map_err(|e| {
        CgtError::Collective(format!(
            "the orchestrator cannot listen on port {port}: {e}"
        ))
    })?);
    #[cfg(feature = "nodes")]
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                CgtError::Collective(format!("no async runtime for the orchestrator: {e}"))
            })?;
        runtime.block_on(burn_collective::start_global_orchestrator(port));
    }
    Ok(())
}

/// Whether this build has the network for several nodes (the `nodes` feature).
pub const HAS_NETWORK: bool = cfg!(feature = "nodes");

/// `Ok` when this build can run several nodes; otherwise [`CgtError::Collective`] saying which
/// feature to build with.
///
/// # Errors
/// Built without the `nodes` feature.
pub fn require_network() -> Result<()> {
    if HAS_NETWORK {
        return Ok(());
    }
    Err(CgtError::Collective(
        "this build has no network for several nodes: build with the `nodes` feature \
         (`cargo xtask-nodes …` for the command line, `tint-cgt/nodes` as a library)"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeSetup {
        NodeSetup::new(1, 2, "ws://10.0.0.1:3000", "ws://10.0.0.2:3001/")
    }

    #[test]
    fn the_orchestrator_refuses_port_0_before_binding() {
        let message = run_orchestrator(0).unwrap_err().to_string();
        if HAS_NETWORK {
            assert!(message.contains("must be in 1..=65535, got 0"), "{message}");
        } else {
            assert!(
                message.contains("no network for several nodes") && message.contains("`nodes`"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_valid_setup_gives_the_data_port_of_its_address() {
        let setup = node();
        setup.validate().unwrap();
        assert_eq!(port_of("node address", &setup.address).unwrap(), 3001);
        assert!(setup.collective_config(2).unwrap().is_valid());
    }

    #[test]
    fn bad_setups_name_the_field_the_rule_and_the_value() {
        let cases: [(NodeSetup, &str); 7] = [
            (NodeSetup { nodes: 0, ..node() }, "at least 1, got 0"),
            (
                NodeSetup { rank: 2, ..node() },
                "below the node count (2), got 2",
            ),
            (
                NodeSetup {
                    orchestrator: "http://a:1".into(),
                    ..node()
                },
                "orchestrator address \"http://a:1\" does not start with ws://",
            ),
            (
                NodeSetup {
                    address: "ws://host".into(),
                    ..node()
                },
                "node address \"ws://host\" has no port",
            ),
            (
                NodeSetup {
                    address: "ws://host:0".into(),
                    ..node()
                },
                "has no port in 1..=65535",
            ),
            (
                NodeSetup {
                    address: "ws://:80".into(),
                    ..node()
                },
                "has no host",
            ),
            (
                NodeSetup {
                    strategy: AllReduceStrategy::Tree(1),
                    ..node()
                },
                "arity of at least 2, got 1",
            ),
        ];
        for (setup, expected) in cases {
            let message = setup.validate().unwrap_err().to_string();
            assert!(message.contains(expected), "{message} lacks {expected:?}");
        }
    }
}
