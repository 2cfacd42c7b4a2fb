//! Building an ONNX graph: names for values, initializers for constants, and nodes.

use super::proto::{attribute_type, data_type, AttributeProto, NodeProto, TensorProto};
use crate::dtype::{DType, Scalar};
use crate::graph::{Graph, ValueId};
use crate::storage::Storage;
use crate::tensor::Tensor;

/// The ONNX element type of a dtype.
pub(super) fn elem_type(d: DType) -> i32 {
    match d {
        DType::F32 => data_type::FLOAT,
        DType::F64 => data_type::DOUBLE,
        DType::I32 => data_type::INT32,
        DType::I64 => data_type::INT64,
        DType::Bool => data_type::BOOL,
    }
}

/// An ONNX graph being built from one of ours.
pub(super) struct Builder<'g> {
    pub g: &'g Graph,
    /// The ONNX name of each value.
    pub names: Vec<String>,
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorProto>,
    fresh: usize,
}

impl<'g> Builder<'g> {
    /// A builder naming `g`'s values: argument inputs by their slot names, the others `v<id>`.
    pub fn new(g: &'g Graph) -> Builder<'g> {
        let mut names: Vec<String> = (0..g.values.len()).map(|v| format!("v{v}")).collect();
        for &(v, src) in &g.inputs {
            if let crate::graph::InputSource::Data(slot) = src {
                names[v] = g.slot_names[slot].clone();
            }
        }
        Builder { g, names, nodes: Vec::new(), initializers: Vec::new(), fresh: 0 }
    }

    /// The name of value `v`.
    pub fn name(&self, v: ValueId) -> String {
        self.names[v].clone()
    }

    /// A new name for an intermediate the mapping of one op needs.
    pub fn fresh(&mut self, hint: &str) -> String {
        self.fresh += 1;
        format!("{hint}_{}", self.fresh)
    }

    /// Adds a node.
    pub fn node(&mut self, op_type: &str, inputs: Vec<String>, outputs: Vec<String>, attrs: Vec<AttributeProto>) {
        let name = format!("{op_type}_{}", self.nodes.len());
        self.nodes.push(NodeProto { input: inputs, output: outputs, name, op_type: op_type.to_string(), attribute: attrs, ..Default::default() });
    }

    /// An initializer holding `storage`, named `name`.
    pub fn initializer(&mut self, name: String, storage: &Storage) -> String {
        let dims = storage.shape().dims().iter().map(|&d| d as i64).collect();
        let raw_data = crate::io::to_le_bytes(storage);
        self.initializers.push(TensorProto { dims, data_type: elem_type(storage.dtype()), name: name.clone(), raw_data, ..Default::default() });
        name
    }

    /// A 0-d initializer: `s` in `dtype` (as the op would convert it).
    pub fn scalar(&mut self, s: Scalar, dtype: DType) -> String {
        let storage = Storage::full(&crate::shape::Shape::scalar(), dtype, s);
        let name = self.fresh("scalar");
        self.initializer(name, &storage)
    }

    /// A 1-d i64 initializer (shapes, axes, pads).
    pub fn i64s(&mut self, values: &[i64]) -> String {
        let storage = Tensor::from_vec(values.to_vec(), &[values.len()]).expect("one dim").to_storage().expect("concrete");
        let name = self.fresh("ints");
        self.initializer(name, &storage)
    }
}

/// An int attribute.
pub(super) fn int(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: attribute_type::INT, i, ..Default::default() }
}

/// An ints attribute.
pub(super) fn ints(name: &str, values: &[usize]) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: attribute_type::INTS, ints: values.iter().map(|&v| v as i64).collect(), ..Default::default() }
}

/// A string attribute.
pub(super) fn string(name: &str, s: &str) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: attribute_type::STRING, s: s.as_bytes().to_vec(), ..Default::default() }
}
