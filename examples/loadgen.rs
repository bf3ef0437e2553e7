//! Load generator for the collector (placeholder).
fn main() {}
