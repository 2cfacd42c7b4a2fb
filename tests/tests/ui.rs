//! The compile errors of `#[graph_fn]` and `#[derive(GraphArg)]`: one case per misuse in
//! `tests/ui/`, each with the exact message rustc shows (regenerate with
//! `TRYBUILD=overwrite cargo test -p tests --test ui` and read the diff); and in
//! `tests/ui/pass/`, programs that must build without a warning and run.

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
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
    cases.pass("ui/pass/*.rs");
}
