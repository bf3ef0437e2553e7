//! The `toolsize` command: thin entry point over [`toolsize::cli`].

fn main() -> std::process::ExitCode {
    toolsize::cli::main()
}
