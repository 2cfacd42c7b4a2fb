//! The math of one element, below every other layer but the value types: the kinds of
//! elementwise and reduction ops, the scalar functions they compute (`Num`, `Float`, the fast
//! f32 `exp`/`tanh`/`sigmoid`), and the one table from each op kind to its function that eager
//! loops and fused programs both build from; and a fused program's description (`program`),
//! which the graph IR holds and the CPU and GPU compile.

mod elementwise;
pub(crate) mod fastmath;
mod functions;
mod kinds;
mod num;
mod program;

pub use elementwise::ElementwiseOp;
pub(crate) use functions::{clamp_value, AddPlain, Cast, CastToAll, Fn1, Fn2, MulPlain, Neg, Not, Visit1, Visit2};
pub(crate) use kinds::{op_names, Domain};
pub use kinds::{BinaryOp, CmpOp, ReduceOp, ScalarAttr, UnaryOp};
pub(crate) use num::{Float, Num, GELU_C, GELU_K};
pub use program::{FusedProgram, Instr, Operand};
