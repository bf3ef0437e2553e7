//! Collector benchmarks (placeholder).
fn main() {}
