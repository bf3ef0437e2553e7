//! The `toolsize` command: thin entry point over [`toolsize::cli`].

/// The daemon allocates per request (a body of up to `otlp.max_request_bytes`, the records of
/// its spans) and frees it when answered. glibc's per-thread arenas hand those pages back to
/// the kernel and fault them in again on the next request: at 100k spans/s that was 15 % of
/// the daemon's CPU. mimalloc keeps them for reuse.
#[cfg(feature = "collector")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolsize::cli::main()
}
