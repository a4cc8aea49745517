//! `cargo xtask`: the project's command line (see <https://github.com/matklad/cargo-xtask>).

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "tint: TinT and CGT on burn")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Placeholder until the subcommands land.
    Version,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Version => println!("{}", env!("CARGO_PKG_VERSION")),
    }
    Ok(())
}
