//! The `paravault` binary: parse arguments, set up logging to stderr, run the CLI.

use clap::Parser;

fn main() -> std::process::ExitCode {
    use std::io::IsTerminal;
    // Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org).
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("PARAVAULT_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    paravault::cli::run(paravault::cli::Cli::parse())
}
