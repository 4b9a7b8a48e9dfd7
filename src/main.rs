//! The `paravault` binary: parse arguments, set up logging to stderr, run the CLI.

use clap::Parser;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("PARAVAULT_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    paravault::cli::run(paravault::cli::Cli::parse())
}
