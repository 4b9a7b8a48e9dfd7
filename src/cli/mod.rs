//! The `paravault` command line: a thin clap adapter over `Vault`.
//!
//! Exit codes (docs/errors.md): 0 ok; 1 blocking findings (lint) or a degraded doctor report;
//! 2 bad usage or a refused argument; 3 the vault or its policy cannot be used; 4 I/O failure.

pub mod render;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::Error;
use crate::vault::{self, Vault, VaultOptions};

#[derive(Debug, Parser)]
#[command(name = "paravault", version, about = "A governed knowledge-vault engine for P.A.R.A. Markdown vaults")]
pub struct Cli {
    /// Vault root (else PARAVAULT_VAULT_DIR, else POWER_VAULT_DIR, else the default vault).
    #[arg(long, global = true, value_name = "DIR")]
    pub vault: Option<PathBuf>,
    /// Print machine-readable JSON instead of a human report.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the P.A.R.A. layout and starter notes where missing (never overwrites).
    Init,
    /// Vault-wide health report; exits 1 when anything is blocking.
    Lint,
    /// Regenerate index.md and the changed directory catalogs.
    Index,
    /// Markdown style checks (never blocking).
    CheckMarkdown,
    /// Vault, policy, counts and findings summary.
    Doctor,
    /// Read one page of a category catalog.
    ReadSubIndex {
        category: String,
        #[arg(long, default_value_t = 1)]
        page: usize,
    },
}

/// Stable exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FINDINGS: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const VAULT: u8 = 3;
    pub const IO: u8 = 4;
}

fn exit_code_of(error: &Error) -> u8 {
    match error {
        Error::PathRefused { .. } | Error::InvalidArgument { .. } | Error::CatalogMissing { .. } => exit::USAGE,
        Error::VaultUnusable(_) | Error::PolicyInvalid { .. } | Error::CatalogConflict { .. } | Error::CatalogEntryTooLarge { .. } => {
            exit::VAULT
        }
        Error::Io { .. } | Error::NoteUnreadable { .. } => exit::IO,
    }
}

fn options() -> VaultOptions {
    let today = std::env::var("PARAVAULT_TODAY").ok().and_then(|t| chrono::NaiveDate::parse_from_str(&t, "%Y-%m-%d").ok());
    VaultOptions { today }
}

/// Opens the vault; the default vault (and only it) is initialised on first use.
fn open(cli: &Cli) -> Result<Vault, Error> {
    let (root, source) = vault::resolve_root(cli.vault.as_deref())?;
    if source == vault::RootSource::Default && !root.exists() {
        let (vault, report) = Vault::init(&root, options())?;
        tracing::info!(created = report.created_notes.len(), "initialised the default vault");
        return Ok(vault);
    }
    Vault::open(&root, options())
}

/// Runs the CLI and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let out = render::Output { json: cli.json, color: std::io::stdout().is_terminal() };
    let result = match &cli.command {
        Command::Init => vault::resolve_root(cli.vault.as_deref())
            .and_then(|(root, _)| Vault::init(&root, options()))
            .map(|(_, report)| out.init(&report)),
        Command::Lint => open(&cli).and_then(|v| v.lint()).map(|r| out.lint(&r)),
        Command::Index => open(&cli).and_then(|v| v.generate_index()).map(|r| out.index(&r)),
        Command::CheckMarkdown => open(&cli).and_then(|v| v.check_markdown()).map(|r| out.markdown(&r)),
        Command::Doctor => open(&cli).and_then(|v| v.doctor()).map(|r| out.doctor(&r)),
        Command::ReadSubIndex { category, page } => open(&cli).and_then(|v| v.read_sub_index(category, *page)).map(|text| out.text(&text)),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            out.error(&error);
            ExitCode::from(exit_code_of(&error))
        }
    }
}
