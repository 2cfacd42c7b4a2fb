//! The readable part of an exported file: the function's signature and its graph as JSON,
//! and the conversions between it and the graph IR. Writing names every constant and
//! captured tensor (`constant.3`, `capture.0`) and hands their data to the tensor section;
//! reading checks each node (see `check.rs`) while it rebuilds the graph, fused programs
//! as the descriptions they were written from (the executor compiles them when it lowers the
//! loaded graph; no code is written or loaded).

use super::check::{check_format, check_op, check_value, elementwise_arity, known_numel, MAX_DEPTH};
use super::ops_wire::{WireDType, WireElementwise, WireOp, WireShape};
use crate::dtype::DType;
use crate::graph::{Epilogue, FormatSpec, FusedProgram, Graph, InputSource, Instr, Node, NodeKind, Operand, PrintPiece, StateWrite, ValueInfo};
use crate::ops::{ConvOp, LinalgOp, Op, TypeRef};
use crate::shape::{broadcast_shapes, Shape};
use crate::tensor::Tensor;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// The whole JSON document.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileDef {
    /// The function's name.
    pub name: String,
    /// What wrote the file (`tensor-core 0.1.0`), for people reading it.
    pub producer: String,
    /// The tensor arguments a call passes, in order.
    pub args: Vec<ArgDef>,
    /// The tensors the function captured: state it owns, stored in the tensor section.
    pub captures: Vec<CaptureDef>,
    /// Slots whose `.grad` must be present (or absent) at every call, as when traced.
    pub grad_guards: Vec<GuardDef>,
    /// The graph that runs.
    pub graph: GraphDef,
    /// The symbolic dims of the arguments and the guards a call must pass (a graph traced
    /// with relaxed dims whose host code branched on them); absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_guards: Option<crate::dim::Guards>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArgDef {
    pub name: String,
    pub dtype: WireDType,
    pub shape: WireShape,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CaptureDef {
    pub name: String,
    /// The tensor section's entry with its value.
    pub tensor: String,
    /// The entry with its `.grad`, if it had one.
    pub grad: Option<String>,
    pub requires_grad: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GuardDef {
    pub slot: usize,
    pub present: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GraphDef {
    name: String,
    num_params: usize,
    num_arg_slots: usize,
    slot_names: Vec<String>,
    values: Vec<ValueDef>,
    inputs: Vec<InputDef>,
    constants: Vec<ConstantDef>,
    nodes: Vec<NodeDef>,
    outputs: Vec<usize>,
    writes: Vec<WriteDef>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueDef {
    dtype: WireDType,
    shape: WireShape,
    name: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputDef {
    value: usize,
    source: SourceDef,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SourceDef {
    Data(usize),
    Grad(usize),
    Param(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConstantDef {
    value: usize,
    tensor: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeDef {
    kind: KindDef,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum KindDef {
    Op(WireOp),
    Print(Vec<PieceDef>),
    AccumulateGrad { slot: usize },
    Fused(ProgramDef),
    Epilogue(EpilogueDef),
    Cond { then: Box<GraphDef>, other: Box<GraphDef> },
    While { cond: Box<GraphDef>, body: Box<GraphDef>, max_iterations: Option<usize>, history: bool },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PieceDef {
    Text(String),
    Value { input: usize, fill: Option<char>, align: Option<char>, width: Option<usize>, precision: Option<usize>, debug: bool },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramDef {
    shape: WireShape,
    inputs: Vec<TypeDef>,
    instrs: Vec<InstrDef>,
    outputs: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeDef {
    dtype: WireDType,
    shape: WireShape,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstrDef {
    op: WireElementwise,
    args: Vec<OperandDef>,
    dtype: WireDType,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OperandDef {
    Input(usize),
    Result(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EpilogueDef {
    anchor: WireOp,
    arity: usize,
    program: ProgramDef,
    slot: usize,
    keep_anchor: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WriteDef {
    Data { slot: usize, value: usize },
    Grad { slot: usize, value: Option<usize> },
}

// ------------------------------------------------------------------------------ writing

/// Collects the tensors a graph refers to while it is written: constants get names
/// `constant.N`, in the order they are met (subgraphs included).
#[derive(Default)]
pub(super) struct TensorSink {
    pub tensors: Vec<(String, Tensor)>,
    constants: usize,
}

impl TensorSink {
    fn constant(&mut self, t: Tensor) -> String {
        let name = format!("constant.{}", self.constants);
        self.constants += 1;
        self.tensors.push((name.clone(), t));
        name
    }
}

impl GraphDef {
    /// The wire form of `g`; its constants go to `sink`.
    pub(super) fn from_graph(g: &Graph, sink: &mut TensorSink) -> GraphDef {
        GraphDef {
            name: g.name.clone(),
            num_params: g.num_params,
            num_arg_slots: g.num_arg_slots,
            slot_names: g.slot_names.clone(),
            values: g
                .values
                .iter()
                .map(|v| ValueDef { dtype: WireDType(v.dtype), shape: WireShape(v.shape.clone()), name: v.name.clone() })
                .collect(),
            inputs: g.inputs.iter().map(|&(value, src)| InputDef { value, source: source_def(src) }).collect(),
            constants: g
                .constants
                .iter()
                .map(|(value, s)| ConstantDef { value: *value, tensor: sink.constant(Tensor::from_storage(s.clone())) })
                .collect(),
            nodes: g
                .nodes
                .iter()
                .map(|n| NodeDef { kind: kind_def(&n.kind, sink), inputs: n.inputs.to_vec(), outputs: n.outputs.to_vec() })
                .collect(),
            outputs: g.outputs.clone(),
            writes: g.writes.iter().map(write_def).collect(),
        }
    }
}

fn source_def(src: InputSource) -> SourceDef {
    match src {
        InputSource::Data(s) => SourceDef::Data(s),
        InputSource::Grad(s) => SourceDef::Grad(s),
        InputSource::Param(k) => SourceDef::Param(k),
    }
}

fn write_def(w: &StateWrite) -> WriteDef {
    match *w {
        StateWrite::Data { slot, value } => WriteDef::Data { slot, value },
        StateWrite::Grad { slot, value } => WriteDef::Grad { slot, value },
    }
}

fn kind_def(kind: &NodeKind, sink: &mut TensorSink) -> KindDef {
    match kind {
        NodeKind::Op(op) => KindDef::Op(WireOp(op.clone())),
        NodeKind::Print(pieces) => KindDef::Print(pieces.iter().map(piece_def).collect()),
        NodeKind::AccumulateGrad { slot } => KindDef::AccumulateGrad { slot: *slot },
        NodeKind::Fused(p) => KindDef::Fused(program_def(p)),
        NodeKind::Epilogue(e) => KindDef::Epilogue(EpilogueDef {
            anchor: WireOp(e.anchor.clone()),
            arity: e.arity,
            program: program_def(&e.program),
            slot: e.slot,
            keep_anchor: e.keep_anchor,
        }),
        NodeKind::Cond { then, other } => {
            KindDef::Cond { then: Box::new(GraphDef::from_graph(then, sink)), other: Box::new(GraphDef::from_graph(other, sink)) }
        }
        NodeKind::While { cond, body, max_iterations, history } => KindDef::While {
            cond: Box::new(GraphDef::from_graph(cond, sink)),
            body: Box::new(GraphDef::from_graph(body, sink)),
            max_iterations: *max_iterations,
            history: *history,
        },
    }
}

fn piece_def(p: &PrintPiece) -> PieceDef {
    match p {
        PrintPiece::Text(t) => PieceDef::Text(t.clone()),
        PrintPiece::Value(input, s) => {
            PieceDef::Value { input: *input, fill: s.fill, align: s.align, width: s.width, precision: s.precision, debug: s.debug }
        }
    }
}

fn program_def(p: &FusedProgram) -> ProgramDef {
    ProgramDef {
        shape: WireShape(p.shape.clone()),
        inputs: p.inputs.iter().map(|(d, s)| TypeDef { dtype: WireDType(*d), shape: WireShape(s.clone()) }).collect(),
        instrs: p
            .instrs
            .iter()
            .map(|i| InstrDef {
                op: WireElementwise(i.op.clone()),
                args: i
                    .args
                    .iter()
                    .map(|a| match *a {
                        Operand::Input(k) => OperandDef::Input(k),
                        Operand::ResultOf(k) => OperandDef::Result(k),
                    })
                    .collect(),
                dtype: WireDType(i.dtype),
            })
            .collect(),
        outputs: p.outputs.clone(),
    }
}

// ------------------------------------------------------------------------------ reading

/// Rebuilds graphs from their wire form, checking each part; the tensors are the file's
/// tensor section by name.
pub(super) struct GraphReader<'a> {
    pub tensors: &'a HashMap<String, Tensor>,
}

type Check<T> = Result<T, String>;

impl GraphReader<'_> {
    /// The graph of `def` (nested `depth` subgraphs deep), every node checked.
    pub(super) fn graph(&self, def: GraphDef, depth: usize) -> Check<Graph> {
        if depth > MAX_DEPTH {
            return Err(format!("subgraphs are nested more than {MAX_DEPTH} deep"));
        }
        let mut g = Graph::new(&def.name);
        g.num_params = def.num_params;
        g.num_arg_slots = def.num_arg_slots;
        g.slot_names = def.slot_names;
        if g.num_arg_slots > g.slot_names.len() {
            return Err(format!("{} argument slots but {} slot names", g.num_arg_slots, g.slot_names.len()));
        }
        for (i, v) in def.values.into_iter().enumerate() {
            check_value(v.dtype.0, &v.shape.0).map_err(|e| format!("value {i}: {e}"))?;
            g.values.push(ValueInfo { dtype: v.dtype.0, shape: v.shape.0, name: v.name });
        }
        let n = g.values.len();
        let id = |v: usize, what: &str| if v < n { Ok(v) } else { Err(format!("{what} names value {v}, but there are {n}")) };
        for input in def.inputs {
            let src = match input.source {
                SourceDef::Data(s) => InputSource::Data(s),
                SourceDef::Grad(s) => InputSource::Grad(s),
                SourceDef::Param(k) => InputSource::Param(k),
            };
            g.inputs.push((id(input.value, "an input")?, src));
        }
        for c in def.constants {
            let v = id(c.value, "a constant")?;
            g.constants.push((v, self.constant(&c.tensor, &g.values[v])?));
        }
        for (i, node) in def.nodes.into_iter().enumerate() {
            let node = self.node(&g, node, depth).map_err(|e| format!("node {i}: {e}"))?;
            g.nodes.push(node);
        }
        g.outputs = def.outputs.into_iter().map(|v| id(v, "an output")).collect::<Check<_>>()?;
        for w in def.writes {
            g.writes.push(match w {
                WriteDef::Data { slot, value } => StateWrite::Data { slot, value: id(value, "a write")? },
                WriteDef::Grad { slot, value } => StateWrite::Grad { slot, value: value.map(|v| id(v, "a write")).transpose()? },
            });
        }
        Ok(g)
    }

    /// A constant's data: the named tensor, which must have the value's dtype and shape.
    fn constant(&self, name: &str, info: &ValueInfo) -> Check<crate::storage::Storage> {
        let t = self.tensors.get(name).ok_or_else(|| format!("the constant `{name}` is not in the tensor section"))?;
        if t.dtype() != info.dtype || t.0.shape != info.shape {
            return Err(format!("the constant `{name}` is {}{}, its value {}{}", t.dtype(), t.0.shape, info.dtype, info.shape));
        }
        t.storage("export::load").map_err(|e| e.to_string())
    }

    fn node(&self, g: &Graph, def: NodeDef, depth: usize) -> Check<Node> {
        let n = g.values.len();
        if let Some(v) = def.inputs.iter().chain(&def.outputs).find(|&&v| v >= n) {
            return Err(format!("names value {v}, but there are {n}"));
        }
        let types: Vec<TypeRef> = def.inputs.iter().map(|&v| TypeRef { dtype: g.values[v].dtype, shape: &g.values[v].shape }).collect();
        let outs = def.outputs.len();
        let kind = match def.kind {
            KindDef::Op(op) => {
                check_op(&op.0, &types).map_err(|e| format!("{}: {e}", op.0.name()))?;
                need(outs == 1, "an op node has one output")?;
                NodeKind::Op(op.0)
            }
            KindDef::Print(pieces) => {
                need(outs == 0, "a print node has no outputs")?;
                NodeKind::Print(pieces.into_iter().map(|p| piece(p, types.len())).collect::<Check<_>>()?)
            }
            KindDef::AccumulateGrad { slot } => {
                need(types.len() == 1 && outs == 1, "accumulate_grad has one input and one output")?;
                need(slot < g.slot_names.len(), &format!("accumulate_grad reads slot {slot}, but there are {}", g.slot_names.len()))?;
                NodeKind::AccumulateGrad { slot }
            }
            KindDef::Fused(p) => {
                let program = program(p)?;
                need(types.len() == program.inputs.len() && outs == program.outputs.len(), "a fused node's inputs and outputs are its program's")?;
                for (k, (t, (dtype, shape))) in types.iter().zip(&program.inputs).enumerate() {
                    need(
                        t.dtype == *dtype && t.shape.admits(shape),
                        &format!("fused input {k} is {}{}, its program's {dtype}{shape}", t.dtype, t.shape),
                    )?;
                }
                NodeKind::Fused(Arc::new(program))
            }
            KindDef::Epilogue(e) => NodeKind::Epilogue(Arc::new(epilogue(e, &types, outs)?)),
            KindDef::Cond { then, other } => {
                NodeKind::Cond { then: Arc::new(self.graph(*then, depth + 1)?), other: Arc::new(self.graph(*other, depth + 1)?) }
            }
            KindDef::While { cond, body, max_iterations, history } => NodeKind::While {
                cond: Arc::new(self.graph(*cond, depth + 1)?),
                body: Arc::new(self.graph(*body, depth + 1)?),
                max_iterations,
                history,
            },
        };
        Ok(Node { kind, inputs: SmallVec::from_vec(def.inputs), outputs: SmallVec::from_vec(def.outputs) })
    }
}

fn need(ok: bool, what: &str) -> Check<()> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

fn piece(p: PieceDef, inputs: usize) -> Check<PrintPiece> {
    Ok(match p {
        PieceDef::Text(t) => PrintPiece::Text(t),
        PieceDef::Value { input, fill, align, width, precision, debug } => {
            need(input < inputs, &format!("a tprint! placeholder reads input {input} of {inputs}"))?;
            need(align.is_none_or(|a| matches!(a, '<' | '^' | '>')), "a tprint! alignment is one of < ^ >")?;
            check_format(width, precision)?;
            PrintPiece::Value(input, FormatSpec { fill, align, width, precision, debug })
        }
    })
}

/// A fused program's description from its instruction list, after checking that every operand exists,
/// every instruction's dtype is what its op gives on its operands over the program's shape,
/// and every input broadcasts to that shape (what the compiled loops take for granted).
fn program(def: ProgramDef) -> Check<FusedProgram> {
    let shape = def.shape.0;
    known_numel(&shape).ok_or_else(|| format!("a fused program's shape {shape} must be known"))?;
    check_value(DType::F64, &shape)?;
    let inputs: Vec<(DType, Shape)> = def.inputs.into_iter().map(|t| (t.dtype.0, t.shape.0)).collect();
    for (k, (dtype, s)) in inputs.iter().enumerate() {
        known_numel(s).ok_or_else(|| format!("fused input {k}: its shape {s} must be known"))?;
        need(broadcast_shapes(s, &shape).as_ref() == Some(&shape), &format!("fused input {k} ({dtype}{s}) does not broadcast to {shape}"))?;
    }
    let mut instrs: Vec<Instr> = Vec::with_capacity(def.instrs.len());
    for (k, i) in def.instrs.into_iter().enumerate() {
        let instr = instr(i, k, &inputs, &instrs, &shape).map_err(|e| format!("fused instruction {k}: {e}"))?;
        instrs.push(instr);
    }
    let mut seen = vec![false; instrs.len()];
    for &o in &def.outputs {
        need(o < instrs.len() && !std::mem::replace(&mut seen[o], true), &format!("fused output {o} is not a distinct instruction"))?;
    }
    need(!def.outputs.is_empty(), "a fused program has outputs")?;
    Ok(FusedProgram { shape, inputs, instrs, outputs: def.outputs })
}

fn instr(def: InstrDef, k: usize, inputs: &[(DType, Shape)], done: &[Instr], shape: &Shape) -> Check<Instr> {
    let op = def.op.0;
    need(def.args.len() == elementwise_arity(&op), &format!("{} takes {} operands", op.name(), elementwise_arity(&op)))?;
    let mut args: SmallVec<[Operand; 3]> = SmallVec::new();
    let mut types: SmallVec<[(DType, &Shape); 3]> = SmallVec::new();
    for a in def.args {
        match a {
            OperandDef::Input(i) if i < inputs.len() => {
                args.push(Operand::Input(i));
                types.push((inputs[i].0, &inputs[i].1));
            }
            OperandDef::Result(r) if r < k => {
                args.push(Operand::ResultOf(r));
                types.push((done[r].dtype, shape));
            }
            _ => return Err("an operand names a missing input or a later result".into()),
        }
    }
    let refs: Vec<TypeRef> = types.iter().map(|&(dtype, shape)| TypeRef { dtype, shape }).collect();
    let op_node = Op::Elementwise(op.clone());
    let (dtype, out) = op_node.infer(&refs).map_err(|e| e.to_string())?;
    need(dtype == def.dtype.0 && out == *shape, &format!("{} gives {dtype}{out}, not {}{shape}", op.name(), def.dtype.0))?;
    Ok(Instr { op, args, dtype })
}

/// An epilogue: a float matmul, conv2d or depthwise2d anchor over inputs of known shapes whose output is a
/// program input over the program's whole shape.
fn epilogue(def: EpilogueDef, types: &[TypeRef], outs: usize) -> Check<Epilogue> {
    let anchor = def.anchor.0;
    let arity_ok = match &anchor {
        Op::Linalg(LinalgOp::Matmul { .. }) => def.arity == 2,
        Op::Conv(ConvOp::Conv2d { .. } | ConvOp::Depthwise2d { .. }) => def.arity == 2 || def.arity == 3,
        _ => return Err(format!("an epilogue's anchor is a matmul, a conv2d or a depthwise2d, not {}", anchor.name())),
    };
    need(arity_ok && def.arity <= types.len(), "the epilogue's anchor input count does not fit")?;
    need(types.iter().all(|t| t.shape.is_known()), "an epilogue's inputs have known shapes")?;
    let program = program(def.program)?;
    need(def.slot < program.inputs.len(), "the epilogue's anchor slot is not a program input")?;
    need(types.len() == def.arity + program.inputs.len() - 1, "the epilogue's input count does not fit its anchor and program")?;
    need(outs == def.keep_anchor as usize + program.outputs.len(), "the epilogue's output count does not fit")?;
    let anchor_types = &types[..def.arity];
    check_op(&anchor, anchor_types)?;
    let (dtype, shape) = anchor.infer(anchor_types).map_err(|e| e.to_string())?;
    need(
        dtype.is_float() && shape == program.shape && program.inputs[def.slot] == (dtype, shape),
        "the epilogue's program does not read its anchor's whole output",
    )?;
    Ok(Epilogue { anchor, arity: def.arity, program: Arc::new(program), slot: def.slot, keep_anchor: def.keep_anchor })
}
