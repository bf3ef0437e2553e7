//! `toolsize generate-assets DIR` (for packaging, not in `--help`): the shell completions and
//! man pages of the command line, written from the clap definitions that parse it, for
//! `scripts/dist.sh` to package. It is parsed apart from [`Cli`](super::Cli), so neither the
//! completions nor the pages offer it.
//!
//! Writes `DIR/completions/` (`toolsize.bash`, `_toolsize` for zsh, `toolsize.fish`) and
//! `DIR/man/` (`toolsize.1` and one `toolsize-<subcommand>.1` per visible subcommand), creating
//! the directories. Generated from [`Cli`](super::Cli), so a flag added to the parser is in both
//! at the next release. The files are small and written once; a directory that cannot be created
//! or a file that cannot be written is a structured `IO` error (exit 2), naming the path.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use clap_complete::Shell;

use super::{Cli, CliError};

/// The shells completions are written for, as the distributions' packages install them.
pub const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Subdirectory of `DIR` that receives the completions.
pub const COMPLETIONS_DIR: &str = "completions";

/// Subdirectory of `DIR` that receives the man pages (section 1).
pub const MAN_DIR: &str = "man";

/// The subcommand's name, recognised before [`Cli`](super::Cli) parses the command line.
pub const SUBCOMMAND: &str = "generate-assets";

/// Writes the shell completions and man pages of `toolsize` into a directory (for packaging).
#[derive(Debug, Parser)]
#[command(name = "generate-assets", bin_name = "toolsize generate-assets")]
pub struct AssetsArgs {
    /// Directory to write `completions/` and `man/` into (created if missing).
    pub dir: PathBuf,
}

/// Parses `args` (the first is the subcommand's name) and runs them; a usage error is
/// structured, exit 2, like every subcommand's.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    match AssetsArgs::try_parse_from(args) {
        Ok(args) => run(&args),
        Err(e) => super::usage_error(e),
    }
}

/// Writes the completions and man pages under `args.dir`; prints each path written.
pub fn run(args: &AssetsArgs) -> ExitCode {
    match write_all(&args.dir) {
        Ok(paths) => {
            for path in paths {
                println!("{}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => e.report(),
    }
}

/// Writes every asset under `dir` and returns the paths written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    let io = |path: &Path, e: std::io::Error| {
        CliError::new("IO", format!("cannot write {}: {e}", path.display()))
    };
    let completions = dir.join(COMPLETIONS_DIR);
    let man = dir.join(MAN_DIR);
    let mut written = Vec::new();
    for d in [&completions, &man] {
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    let name = Cli::command().get_name().to_string();
    for shell in SHELLS {
        let mut cmd = Cli::command();
        let path = clap_complete::generate_to(shell, &mut cmd, &name, &completions)
            .map_err(|e| io(&completions, e))?;
        written.push(path);
    }
    clap_mangen::generate_to(Cli::command(), &man).map_err(|e| io(&man, e))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&man)
        .map_err(|e| io(&man, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    pages.sort();
    written.extend(pages);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_completions_and_a_page_per_visible_subcommand() {
        let dir = std::env::temp_dir().join(format!("toolsize-assets-{}", std::process::id()));
        let written = write_all(&dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for expected in [
            "toolsize.bash",
            "_toolsize",
            "toolsize.fish",
            "toolsize.1",
            "toolsize-wrap.1",
            "toolsize-mcp.1",
        ] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} in {names:?}"
            );
        }
        assert!(
            !names.iter().any(|n| n.contains(SUBCOMMAND)),
            "the packaging subcommand has no page: {names:?}"
        );
        for file in &written {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(
                !text.contains(SUBCOMMAND),
                "{} offers {SUBCOMMAND}",
                file.display()
            );
        }
        let bash =
            std::fs::read_to_string(dir.join(COMPLETIONS_DIR).join("toolsize.bash")).unwrap();
        assert!(bash.contains("--max-output"), "wrap's flags are completed");
        let page = std::fs::read_to_string(dir.join(MAN_DIR).join("toolsize.1")).unwrap();
        assert!(page.contains(".TH toolsize 1"), "{page:.200}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
