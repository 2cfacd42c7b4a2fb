//! A random-program differential fuzz: seeded programs over every op family run eagerly and
//! as traced, optimized graphs — forward outputs, gradients and in-place state, on the data
//! traced with and on fresh data — and every result must have the same bits.
//!
//! - [`generate`] builds program `i` of a seed's stream ([`Program`], `gen/`);
//! - [`run`] interprets one through the public API, the same code in both modes;
//! - [`check`] is the differential harness, usable on any function of tensors;
//! - [`shrink`] reduces a failing program to a minimal one, [`to_rust`] prints it as a test;
//! - [`campaign`] runs many programs on several threads and reports what it found;
//! - [`generate_relaxed`], [`check_relaxed`] and [`relaxed_campaign`] do the same for
//!   relaxed-shape programs, called at several batch sizes through a `#[graph_fn]` that
//!   relaxes the batch dim (its guards passing and failing).
//!
//! `cargo test -p tests --test fuzz` runs a bounded slice; `cargo run --release -p tests
//! --bin fuzz -- --help` runs long campaigns (see docs/TESTING.md).

mod campaign;
mod check;
mod data;
mod generator;
mod interp;
mod print;
mod program;
mod relaxed;
mod relaxed_check;
mod rng;
mod shrink;

pub use campaign::{campaign, run_program, CampaignReport, Failure, Options, Outcome};
pub use check::{bits, check, same_bits, Agreement, Function, Mismatch};
pub use data::{from_f64, Dist, InputSpec};
pub use generator::{generate, Config};
pub use interp::run;
pub use print::to_rust;
pub use program::{Binary, Block, GradMode, Id, InPlace, Node, Program, Reduce, Rhs, Scalar, Step, Ty, Unary};
pub use relaxed::{generate_relaxed, run_relaxed, DimTest, Relax, RelaxedProgram, Step as RelaxedStep};
pub use relaxed_check::{check_relaxed, relaxed_campaign, RelaxedMismatch, RelaxedReport};
pub use rng::Rng;
pub use shrink::shrink;

use tensor_core::{Result, Tensor};

/// Turns a method's result into a `Result`, whether the method returns the value itself
/// (`sum()`, `cast()` today) or a `Result` (the fallible signatures they are moving to), so
/// fuzz code and printed programs build with either.
///
/// ```
/// use tensor_core::prelude::*;
/// use tests::fuzz::Fallible;
/// let x = Tensor::ones(&[2], DType::F32);
/// assert_eq!(x.sum().fallible()?.item::<f32>()?, 2.0);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait Fallible<T> {
    /// The value as a `Result`.
    fn fallible(self) -> Result<T>;
}

impl Fallible<Tensor> for Tensor {
    fn fallible(self) -> Result<Tensor> {
        Ok(self)
    }
}

impl Fallible<()> for () {
    fn fallible(self) -> Result<()> {
        Ok(())
    }
}

impl<T> Fallible<T> for Result<T> {
    fn fallible(self) -> Result<T> {
        self
    }
}
