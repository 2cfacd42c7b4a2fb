//! The compile errors of `#[graph_fn]` and `#[derive(GraphArg)]`: one case per misuse in
//! `macros-ui/ui/`, each with the exact message rustc shows (regenerate with
//! `TRYBUILD=overwrite cargo test -p macros-ui --test ui` and read the diff). The programs in
//! `macros-ui/ui/pass/`, which must build without a warning and run, are this package's other
//! tests (`[[test]]` targets without a harness, Cargo.toml).
//!
//! trybuild checks the cases in a Cargo project of its own, with its own target directory
//! (`target/tests/trybuild`) and the default `dev` profile, so tensor-core and its
//! dependencies are compiled there once more. With compile-fail cases only it runs `cargo
//! check`: metadata, no code. This package's only dev-dependencies are tensor-core and
//! trybuild, so that is all it checks; from the `tests` package it built tract-onnx and the
//! other test dependencies too (docs/TESTING.md).

use std::io::IsTerminal;

#[test]
fn ui() {
    // trybuild colours its report whenever TERM allows, also into a pipe or a log file, where
    // the escape codes show as text; its terminal library honours NO_COLOR.
    if !std::io::stderr().is_terminal() {
        // SAFETY: this binary's only test sets it before trybuild starts; no other thread of
        // the process reads or writes the environment meanwhile.
        unsafe { std::env::set_var("NO_COLOR", "1") };
    }
    // The cases' own build: no debug info in what it still compiles to code (build scripts,
    // proc macros); diagnostics do not depend on it. Read by the cargo that trybuild starts.
    // SAFETY: as above, no other thread touches the environment.
    unsafe { std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false") };
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
}
