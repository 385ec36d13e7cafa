//! Loom models of blocking admission (run with `--cfg loom`).

mod loom_admission;
