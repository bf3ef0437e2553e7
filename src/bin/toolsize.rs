//! The `toolsize` command: thin entry point over [`toolsize::cli`].

use clap::Parser;

fn main() -> std::process::ExitCode {
    toolsize::cli::run(toolsize::cli::Cli::parse())
}
