//! `cargo xtask orchestrator`: burn's global orchestrator for CGT training over several nodes
//! (`cargo xtask eval cgt --nodes N ...`; docs/cgt.md, "Several nodes"). It only introduces the nodes
//! to each other; the tensors go directly between them.

use anyhow::Result;

/// Arguments of `cargo xtask orchestrator`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct OrchestratorArgs {
    /// Port to listen on (every interface); every node's `--orchestrator` is `ws://<this host>:<port>`.
    /// Port 0 is refused: the system would pick a port that the nodes could not be told.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
}

/// Runs the orchestrator until the process is interrupted (Ctrl-C).
pub(crate) fn run(args: &OrchestratorArgs) -> Result<()> {
    tint_cgt::nodes::require_network()?;
    eprintln!(
        "starting the orchestrator on port {} (every interface); start every node with \
         --orchestrator ws://<this host>:{}; Ctrl-C stops it",
        args.port, args.port
    );
    tint_cgt::nodes::run_orchestrator(args.port)?;
    Ok(())
}
