//! The compile errors of `#[graph_fn]` and `#[derive(GraphArg)]`: one case per misuse in
//! `tensor-macros/ui/`, each with the exact message rustc shows (regenerate with
//! `TRYBUILD=overwrite cargo test -p tensor-macros --test ui` and read the diff); and in
//! `tensor-macros/ui/pass/`, programs that must build without a warning and run.
//!
//! trybuild builds the cases in a Cargo project of its own, with its own target directory
//! (`target/tests/trybuild`) and the default `dev` profile, so tensor-core and its
//! dependencies are compiled there once more. This package's only dev-dependencies are
//! tensor-core and trybuild, so that is all it builds, and without debug info (which no case
//! needs): 1.3 GB and 8 minutes on the loaded 2-core machine, against 4.5 GB and 17.5 minutes
//! from the `tests` package (docs/TESTING.md).

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
    // The cases' own build: no debug info (diagnostics do not depend on it; it was most of
    // the bytes and much of the link time). Read by the cargo that trybuild starts.
    // SAFETY: as above, no other thread touches the environment.
    unsafe { std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false") };
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
    cases.pass("ui/pass/*.rs");
}
