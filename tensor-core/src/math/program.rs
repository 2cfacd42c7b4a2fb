//! A fused elementwise program, described: its instructions (elementwise ops over the
//! program's inputs and earlier results), the shape they compute over and the results that
//! leave it. Plain data, and nothing but data — the graph IR holds it in its `Fused` and
//! `Epilogue` nodes and exports serialize it. It lives this low because everything that
//! turns it into code reads it: the CPU compiler (`kernels::fused` builds loops and the
//! generated code from it when a graph is lowered to an `Executable`) and the GPU generator
//! (`cuda::source`).

use super::elementwise::ElementwiseOp;
use crate::dtype::DType;
use crate::shape::Shape;
use smallvec::SmallVec;

/// Where an instruction's operand comes from.
///
/// ```
/// use tensor_core::graph::Operand;
/// assert_ne!(Operand::Input(0), Operand::ResultOf(0)); // program input 0, instruction 0's result
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Program input `i`.
    Input(usize),
    /// The result of instruction `i`. (Not `Result`: a public variant of that name would make
    /// rustc print `std::result::Result` in full in every diagnostic of a user's crate.)
    ResultOf(usize),
}

/// One elementwise op of a program.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::graph::{Instr, Operand};
/// use tensor_core::ops::{ElementwiseOp, UnaryOp};
/// let exp = Instr { op: ElementwiseOp::Unary(UnaryOp::Exp), args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F64 };
/// assert_eq!(exp.op.name(), "exp");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instr {
    /// The elementwise op.
    pub op: ElementwiseOp,
    /// Its operands.
    pub args: SmallVec<[Operand; 3]>,
    /// The dtype of the result.
    pub dtype: DType,
}

/// A fused elementwise program over one output shape: what a `Fused` node computes (and an
/// `Epilogue` node on its anchor's output).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::NodeKind;
/// let x = Tensor::ones(&[16], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(2.0)?.exp()?]))?;
/// let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!("{}", f.to_text()) };
/// assert_eq!((p.summary(), p.shape.dims(), p.outputs.as_slice()), ("mul,exp".to_string(), &[16][..], &[1][..]));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FusedProgram {
    /// The shape every instruction computes over (the outputs' shape).
    pub shape: Shape,
    /// The dtype and shape of each input.
    pub inputs: Vec<(DType, Shape)>,
    /// The instructions in order.
    pub instrs: Vec<Instr>,
    /// The instructions whose results are the program's outputs, in output order.
    pub outputs: Vec<usize>,
}

impl FusedProgram {
    /// The names of the fused ops, for printing (`mul,add,tanh`; a long program shows its
    /// first four and last two).
    pub fn summary(&self) -> String {
        let names: Vec<&str> = self.instrs.iter().map(|i| i.op.name()).collect();
        if names.len() <= 8 {
            names.join(",")
        } else {
            format!("{} ... {} ({} ops)", names[..4].join(","), names[names.len() - 2..].join(","), names.len())
        }
    }
}

impl std::fmt::Debug for FusedProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FusedProgram[{}]{}", self.summary(), self.shape)
    }
}
