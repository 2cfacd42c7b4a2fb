//! Empty: this package holds the compile-error tests of tensor-core's macros
//! (`tests/ui.rs`, cases in `ui/`).
