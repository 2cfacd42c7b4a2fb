//! The compile errors of `#[graph_fn]` and `#[derive(GraphArg)]`: one case per misuse in
//! `tests/ui/`, each with the exact message rustc shows (regenerate with
//! `TRYBUILD=overwrite cargo test -p tests --test ui` and read the diff).

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("ui/*.rs");
}
