//! `udah conform [--profile libibverbs|kernel] FILE...`: runs vector files
//! through the core, prints every mismatch and ends with `N passed, M failed`.
//!
//! Exit status: 0 when every case passes, 1 when some case fails, 2 when an
//! input cannot be read, breaks the format (a cut-off line, a case name used
//! twice, a GID index listed twice or past `gid_tbl_len`, an `expect` of the
//! other profile's format) or holds no case: then nothing is run.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use udah_cli::vectors::{self, Profile};

/// The profile to run every case under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProfileArg {
    /// libibverbs `ibv_init_ah_from_wc`.
    Libibverbs,
    /// Linux `ib_init_ah_attr_from_wc`.
    Kernel,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Profile {
        match p {
            ProfileArg::Libibverbs => Profile::Libibverbs,
            ProfileArg::Kernel => Profile::Kernel,
        }
    }
}

/// Arguments of `udah conform`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Run every case under this profile instead of the one its `profile`
    /// field names; each case's `expect` must have this profile's format
    /// (FORMAT.md, FORMAT-kernel.md). For the edge-case document, which has
    /// both: take only this side.
    #[arg(long, value_enum)]
    profile: Option<ProfileArg>,
    /// Vector files: JSON Lines (vectors/FORMAT.md, FORMAT-kernel.md) or
    /// the edge-case document (vectors/ah_from_wc_edge_cases.json).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let profile = args.profile.map(Profile::from);
    let mut loaded = Vec::new();
    let mut unreadable = false;
    for path in &args.files {
        match vectors::load_file(path, profile) {
            Ok(cases) if cases.is_empty() => {
                eprintln!("udah conform: error: {}: no cases (an empty file passes nothing)", path.display());
                unreadable = true;
            }
            Ok(cases) => loaded.push((path, cases)),
            Err(e) => {
                eprintln!("udah conform: error: {e}");
                unreadable = true;
            }
        }
    }
    if unreadable {
        return ExitCode::from(2);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let (mut passed, mut failed) = (0u64, 0u64);
    for (path, cases) in &loaded {
        for lc in cases {
            let ok = match lc.case.check() {
                Ok(m) if m.is_empty() => true,
                Ok(m) => {
                    for x in &m {
                        let _ = writeln!(out, "{x}");
                    }
                    false
                }
                Err(e) => {
                    let _ = writeln!(out, "ERROR {}:{}: {}: {e}", path.display(), lc.line, lc.case.name());
                    false
                }
            };
            if ok {
                passed += 1;
            } else {
                failed += 1;
            }
        }
    }
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    let _ = out.flush();
    if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
