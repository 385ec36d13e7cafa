//! Loom models of blocking admission and drain leases (run with `--cfg loom`).

mod loom_admission;
mod loom_lease;
