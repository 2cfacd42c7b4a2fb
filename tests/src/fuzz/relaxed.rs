//! Relaxed-shape programs: random programs over an input `x: f32[n, k]` whose first dim `n`
//! varies between calls, run through a `#[graph_fn]` whose trace relaxes `n`
//! (`reduce_retracing`, or an `input_signature` with `?`), called at several sizes in turn —
//! sizes its relaxed trace serves, and sizes that fail its guards and trace again — and
//! compared with the same program run eagerly at each size, bit for bit.
//!
//! Besides the usual ops (elementwise, softmax, reductions over the batch, whose mean scales
//! by `1/n` at run time, products, `-1` reshapes, column slices and joins), a program may
//! read `n` as host code does: branch on it (`if v.dim(0) < k`, `n % m == r`), which records
//! a guard, or use it as a number (`usize::from(v.dim(0))`), which specializes the trace.

use super::interp::{binary, unary};
use super::program::{Binary, Unary};
use super::rng::Rng;
use tensor_core::{DType, Result, Tensor};

/// How the graph function relaxes `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relax {
    /// `#[graph_fn(reduce_retracing)]`: the first size traces exactly, a second relaxes.
    ReduceRetracing,
    /// `#[graph_fn(input_signature(x: f32[?, ?]))]`: one relaxed trace from the start.
    Signature,
}

/// A value's type: `[n, c]`, `[c]` or a scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `[n, c]`: one row per batch entry.
    Rows(usize),
    /// `[c]`: reduced over the batch.
    Flat(usize),
    /// `[]`.
    Scalar,
}

/// What host code asks of a dim `n` before choosing a branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimTest {
    /// `n < k`.
    Less(usize),
    /// `n % m == r`.
    Mod(usize, usize),
    /// `n == k`.
    Equal(usize),
}

/// One step; each defines the next value (`v{inputs + i}`), values numbered from `x` = `v0`.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// An elementwise function.
    Unary(Unary, usize),
    /// Two values that broadcast (same columns, or one of them reduced).
    Binary(Binary, usize, usize),
    /// A value and a Rust scalar.
    Scalar(Binary, usize, f64),
    /// `softmax` over the columns.
    Softmax(usize),
    /// `sum`, `mean` or `max` over the batch (`[n, c]` to `[c]`).
    OverBatch(u8, usize),
    /// `sum` over the columns, kept (`[n, c]` to `[n, 1]`).
    OverColumns(usize),
    /// The mean of every element.
    MeanAll(usize),
    /// A product with a constant `[c, m]` drawn from the seed.
    Matmul(usize, usize, u64),
    /// `reshape([-1, a, c / a])`, `tanh`, `flatten_from(1)`: `-1` reshapes of a relaxed batch.
    Regroup(usize, usize),
    /// Columns `start..start + len`.
    Narrow(usize, usize, usize),
    /// Two `[n, _]` values side by side.
    Join(usize, usize),
    /// `if v.dim(0) <test> { v * a } else { v + b }` (a guard on a relaxed trace).
    Branch(usize, DimTest),
    /// `v * usize::from(v.dim(0))` (specializes a relaxed trace to the traced size).
    TimesRows(usize),
}

/// A relaxed-shape program: its columns, steps and outputs, and the sizes it is called at.
#[derive(Clone, Debug, PartialEq)]
pub struct RelaxedProgram {
    /// `x` is `[n, cols]`.
    pub cols: usize,
    /// The steps.
    pub steps: Vec<Step>,
    /// The values returned: every value no step reads.
    pub outputs: Vec<usize>,
    /// The sizes `n` of the calls, in order.
    pub sizes: Vec<usize>,
    /// How the graph function relaxes `n`.
    pub relax: Relax,
    /// The seed of the calls' data.
    pub seed: u64,
}

impl Step {
    /// The values it reads.
    pub fn operands(&self) -> Vec<usize> {
        match *self {
            Step::Binary(_, a, b) | Step::Join(a, b) => vec![a, b],
            Step::Unary(_, a)
            | Step::Scalar(_, a, _)
            | Step::Softmax(a)
            | Step::OverBatch(_, a)
            | Step::OverColumns(a)
            | Step::MeanAll(a)
            | Step::Matmul(a, ..)
            | Step::Regroup(a, _)
            | Step::Narrow(a, ..)
            | Step::Branch(a, _)
            | Step::TimesRows(a) => vec![a],
        }
    }
}

impl RelaxedProgram {
    /// True when the program reads a relaxed dim as host code does: `n` in a branch or as a
    /// number, or — with the signature, whose columns are relaxed too — the columns a
    /// product or a regrouping reads as a number (which specializes the trace when they are
    /// no symbol, a join's, say).
    pub fn reads_dims(&self) -> bool {
        self.steps.iter().any(|s| match s {
            Step::Branch(..) | Step::TimesRows(_) => true,
            Step::Matmul(..) | Step::Regroup(..) => self.relax == Relax::Signature,
            _ => false,
        })
    }
}

/// Program `index` of `seed`'s stream of relaxed programs.
///
/// ```
/// use tests::fuzz::generate_relaxed;
/// assert_eq!(generate_relaxed(3, 7), generate_relaxed(3, 7));
/// assert!(generate_relaxed(3, 7).sizes.len() >= 4);
/// ```
pub fn generate_relaxed(seed: u64, index: u64) -> RelaxedProgram {
    let mut rng = Rng::derive(seed ^ 0x7E1A_8ED0, index);
    let cols = rng.range(1, 6);
    let mut kinds = vec![Kind::Rows(cols)];
    let mut steps = Vec::new();
    for _ in 0..rng.range(2, 7) {
        if let Some((step, kind)) = step(&mut rng, &kinds) {
            steps.push(step);
            kinds.push(kind);
        }
    }
    // Every value no step reads is an output: no dead code, so an op that fails eagerly
    // fails in the graph too (the graph would drop a dead one).
    let read: Vec<usize> = steps.iter().flat_map(Step::operands).collect();
    let outputs = (1..kinds.len()).filter(|v| !read.contains(v)).collect();
    let pool = [0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 31];
    let sizes = (0..rng.range(4, 7)).map(|_| *rng.pick(&pool)).collect();
    let relax = if rng.chance(0.7) { Relax::ReduceRetracing } else { Relax::Signature };
    RelaxedProgram { cols, steps, outputs, sizes, relax, seed: rng.next_u64() }
}

fn pick_of(rng: &mut Rng, kinds: &[Kind], want: impl Fn(Kind) -> bool) -> Option<usize> {
    let fits: Vec<usize> = (0..kinds.len()).filter(|&i| want(kinds[i])).collect();
    (!fits.is_empty()).then(|| *rng.pick(&fits))
}

fn rows(k: Kind) -> bool {
    matches!(k, Kind::Rows(_))
}

/// A random step over the values so far and the kind of its result.
fn step(rng: &mut Rng, kinds: &[Kind]) -> Option<(Step, Kind)> {
    let any = rng.below(kinds.len());
    let unaries = [Unary::Neg, Unary::Exp, Unary::Tanh, Unary::Sigmoid, Unary::Relu, Unary::Abs];
    let binaries = [Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Maximum, Binary::Minimum];
    let r = pick_of(rng, kinds, rows);
    let cols_of = |i: usize| match kinds[i] {
        Kind::Rows(c) | Kind::Flat(c) => c,
        Kind::Scalar => 1,
    };
    Some(match rng.below(13) {
        0 => (Step::Unary(*rng.pick(&unaries), any), kinds[any]),
        1 => {
            // A partner that broadcasts with `any`: the same kind, a reduced one, or a scalar.
            let a = any;
            let b = pick_of(rng, kinds, |k| k == kinds[a] || k == Kind::Scalar || matches!((kinds[a], k), (Kind::Rows(c), Kind::Flat(d)) if c == d))?;
            let (a, b) = if rng.chance(0.5) { (a, b) } else { (b, a) };
            let kind = if rows(kinds[a]) || rows(kinds[b]) { kinds[if rows(kinds[a]) { a } else { b }] } else { kinds[a].wider(kinds[b]) };
            (Step::Binary(*rng.pick(&binaries), a, b), kind)
        }
        2 => (Step::Scalar(*rng.pick(&binaries), any, *rng.pick(&[0.5, 2.0, -1.5, 3.0])), kinds[any]),
        3 => (Step::Softmax(r?), kinds[r?]),
        4 => (Step::OverBatch(rng.below(3) as u8, r?), Kind::Flat(cols_of(r?))),
        5 => (Step::OverColumns(r?), Kind::Rows(1)),
        6 => (Step::MeanAll(any), Kind::Scalar),
        7 => {
            let m = rng.range(1, 5);
            (Step::Matmul(r?, m, rng.next_u64()), Kind::Rows(m))
        }
        8 => {
            let c = cols_of(r?);
            let a = *rng.pick(&(1..=c).filter(|a| c % a == 0).collect::<Vec<_>>());
            (Step::Regroup(r?, a), kinds[r?])
        }
        9 => {
            let c = cols_of(r?);
            let start = rng.below(c);
            let len = rng.range(1, c - start);
            (Step::Narrow(r?, start, len), Kind::Rows(len))
        }
        10 => {
            let b = pick_of(rng, kinds, rows)?;
            (Step::Join(r?, b), Kind::Rows(cols_of(r?) + cols_of(b)))
        }
        11 => {
            let test = match rng.below(3) {
                0 => DimTest::Less(*rng.pick(&[1, 3, 6, 10])),
                1 => DimTest::Mod(*rng.pick(&[2, 3, 4]), rng.below(2)),
                _ => DimTest::Equal(*rng.pick(&[0, 1, 5, 8])),
            };
            (Step::Branch(r?, test), kinds[r?])
        }
        _ => (Step::TimesRows(r?), kinds[r?]),
    })
}

impl Kind {
    /// The larger of two non-row kinds (a `[c]` over a scalar).
    fn wider(self, other: Kind) -> Kind {
        if self == Kind::Scalar {
            other
        } else {
            self
        }
    }
}

/// Runs `p` on `x` through the public API: the same code eagerly and while tracing.
pub fn run_relaxed(p: &RelaxedProgram, x: &Tensor) -> Result<Vec<Tensor>> {
    let mut values = vec![x.clone()];
    for s in &p.steps {
        let v = |i: usize| &values[i];
        let out = match *s {
            Step::Unary(op, a) => unary(op, v(a))?,
            Step::Binary(op, a, b) => binary(op, v(a), v(b).into())?,
            Step::Scalar(op, a, s) => binary(op, v(a), s.into())?,
            Step::Softmax(a) => v(a).softmax(1)?,
            Step::OverBatch(0, a) => v(a).sum_axes(&[0], false)?,
            Step::OverBatch(1, a) => v(a).mean_axes(&[0], false)?,
            Step::OverBatch(_, a) => v(a).max_axes(&[0], false)?,
            Step::OverColumns(a) => v(a).sum_axes(&[1], true)?,
            Step::MeanAll(a) => v(a).mean()?,
            Step::Matmul(a, m, seed) => {
                let c = usize::from(v(a).dim(1));
                v(a).matmul(&Tensor::randn(&[c, m], DType::F32, seed))?
            }
            Step::Regroup(a, g) => {
                let c = usize::from(v(a).dim(1));
                v(a).reshape([-1, g as isize, (c / g) as isize])?.tanh()?.flatten_from(1)?
            }
            Step::Narrow(a, start, len) => v(a).narrow(1, start, len)?,
            Step::Join(a, b) => Tensor::concat(&[v(a), v(b)], 1)?,
            Step::Branch(a, test) => {
                let n = v(a).dim(0);
                let taken = match test {
                    DimTest::Less(k) => n < k,
                    DimTest::Mod(m, r) => n % m == r,
                    DimTest::Equal(k) => n == k,
                };
                if taken {
                    v(a).mul(2.0)?
                } else {
                    v(a).add(1.0)?
                }
            }
            Step::TimesRows(a) => v(a).mul(usize::from(v(a).dim(0)) as f64)?,
        };
        values.push(out);
    }
    Ok(p.outputs.iter().map(|&i| values[i].clone()).collect())
}
