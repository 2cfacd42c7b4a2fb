//! The names ONNX export gives the dims that are symbolic in a trace (`dim_param`).
//!
//! An argument's relaxed dim is named by its symbol (`n0`, as the function's guards and text
//! name it), so two dims a runtime must keep equal have one name. An output's unknown dim is
//! named by the symbol it equals: the graph's shape rules run once on *probe* sizes (a large
//! size per symbol, one for symbols a guard says are equal), and an output dim that comes out
//! as a symbol's probe is that symbol. Any other unknown dim (`n0 * 2`, a dim of unknown
//! origin) gets a name of its own (`output_0_dim1`), which ties it to nothing.

use crate::dim::guard::{Cmp, Expr, Guards, Term};
use crate::graph::{Graph, InputSource, NodeKind, ValueId};
use crate::ops::TypeRef;
use crate::shape::{Shape, UNKNOWN};
use smallvec::SmallVec;

/// The probe size of symbol class `class`: large, distinct per class, and far from the sizes
/// a graph has of its own.
fn probe(class: u32) -> usize {
    1_000_003 + 7_919 * class as usize
}

/// Each value's dims at the probe sizes (where the shape rules could say), and which symbol
/// each probe size stands for.
pub(super) struct DimNames {
    probes: Vec<Option<Shape>>,
    /// (probe size, symbol number): the smallest symbol of each class.
    symbols: Vec<(usize, u32)>,
}

impl DimNames {
    /// The names for `g`'s values, whose argument dims are the symbols of `guards`.
    pub(super) fn new(g: &Graph, guards: Option<&Guards>) -> DimNames {
        let classes = guards.map(classes).unwrap_or_default();
        let mut symbols: Vec<(usize, u32)> = classes.iter().map(|&(_, _, _, class)| (probe(class), class)).collect();
        symbols.sort_unstable();
        symbols.dedup();
        let mut probes: Vec<Option<Shape>> = vec![None; g.values.len()];
        for &(v, src) in &g.inputs {
            let shape = &g.values[v].shape;
            probes[v] = match src {
                InputSource::Data(slot) if slot < g.num_arg_slots && !shape.is_unknown_rank() => {
                    let dims: Option<Vec<usize>> = shape
                        .dims()
                        .iter()
                        .enumerate()
                        .map(|(axis, &d)| match d {
                            UNKNOWN => classes.iter().find(|c| c.0 == slot && c.1 == axis).map(|c| probe(c.3)),
                            d => Some(d),
                        })
                        .collect();
                    dims.map(|d| Shape::new(&d))
                }
                _ => shape.is_known().then(|| shape.clone()),
            };
        }
        for &(v, _) in &g.constants {
            probes[v] = Some(g.values[v].shape.clone());
        }
        for node in &g.nodes {
            let NodeKind::Op(op) = &node.kind else { continue };
            let inputs: Option<SmallVec<[TypeRef; 4]>> =
                node.inputs.iter().map(|&v| probes[v].as_ref().map(|shape| TypeRef { dtype: g.values[v].dtype, shape })).collect();
            if let Some(Ok((_, shape))) = inputs.map(|i| op.infer(&i)) {
                probes[node.outputs[0]] = Some(shape);
            }
        }
        DimNames { probes, symbols }
    }

    /// The name of dim `axis` of value `v` (unknown in the graph), for the input or output
    /// named `name`.
    pub(super) fn name(&self, v: ValueId, axis: usize, name: &str) -> String {
        let at_probe = self.probes[v].as_ref().and_then(|s| s.dims().get(axis).copied());
        match self.symbols.iter().find(|&&(p, _)| Some(p) == at_probe) {
            Some((_, symbol)) => format!("n{symbol}"),
            None => format!("{name}_dim{axis}"),
        }
    }
}

/// Each input symbol as (argument slot, axis, symbol number, class): symbols a guard says
/// are equal (`n0 == n1`) share the class of the smallest.
fn classes(guards: &Guards) -> Vec<(usize, usize, u32, u32)> {
    let input = |t: Term| match t {
        Term::Sym(e) => match guards.exprs.get(e as usize) {
            Some(&Expr::Input { index, .. }) => Some(index),
            _ => None,
        },
        Term::Const(_) => None,
    };
    let mut class: Vec<(usize, usize, u32, u32)> = guards
        .exprs
        .iter()
        .filter_map(|e| match *e {
            Expr::Input { leaf, axis, index } => Some((leaf as usize, axis as usize, index, index)),
            Expr::Bin(..) => None,
        })
        .collect();
    // Merge the classes of equal symbols until nothing changes (a handful of symbols).
    let mut changed = true;
    while changed {
        changed = false;
        for g in guards.guards.iter().filter(|g| g.cmp == Cmp::Eq) {
            let (Some(a), Some(b)) = (input(g.lhs), input(g.rhs)) else { continue };
            let of = |s: u32, class: &[(usize, usize, u32, u32)]| class.iter().find(|c| c.2 == s).map_or(s, |c| c.3);
            let (ca, cb) = (of(a, &class), of(b, &class));
            if ca != cb {
                let (keep, drop) = (ca.min(cb), ca.max(cb));
                class.iter_mut().filter(|c| c.3 == drop).for_each(|c| c.3 = keep);
                changed = true;
            }
        }
    }
    class
}
