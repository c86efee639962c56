//! Benchmark fixtures for udah (filled by the benchmark work).
