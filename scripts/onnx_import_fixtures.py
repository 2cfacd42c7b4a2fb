#!/usr/bin/env python3
"""Writes the small ONNX models the import tests read (tests/fixtures/onnx_import/).

    /tmp/venv/bin/python scripts/onnx_import_fixtures.py tests/fixtures/onnx_import

- external/model.onnx + weights.bin: a MatMul + Add whose weights live in weights.bin
  (`external_data`), with a dynamic batch dim (`dim_param: "batch"`).
- cnn.onnx: Conv + Relu + MaxPool + Flatten + Gemm + Softmax, opset 13, dynamic batch:
  the model the mutation property test mangles.
- wrong_initializer.onnx: cnn.onnx with its dense weight 35 wide, where 36 come in.
- unsupported.onnx: two ops import does not map (RandomUniformLike, RandomNormalLike) beside Relu.
- gelu_opset17.onnx: Gelu, which opset 17 does not have (it came in 20).
- cast_uint8.onnx: a Cast to UINT8, an element type tensor-core lacks.
- dangling.onnx: a Relu reading a name nothing makes.
Needs only `onnx` and `numpy`; cargo test never runs it.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path, check=True):
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, path)


def model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def f32(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def main(out):
    os.makedirs(os.path.join(out, "external"), exist_ok=True)
    rng = np.random.default_rng(0)

    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    m = model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        [f32("x", ["batch", 4])],
        [f32("y", ["batch", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    onnx.save(m, os.path.join(out, "external", "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)

    cw = (rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32)
    cb = rng.standard_normal((4,)).astype(np.float32)
    fw = (rng.standard_normal((5, 36)) * 0.2).astype(np.float32)
    fb = rng.standard_normal((5,)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1, name="dense"),
        helper.make_node("Softmax", ["g"], ["y"], axis=1, name="softmax"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in [(cw, "cw"), (cb, "cb"), (fw, "fw"), (fb, "fb")]]
    save(model(nodes, [f32("x", ["batch", 1, 6, 6])], [f32("y", ["batch", 5])], inits), os.path.join(out, "cnn.onnx"))
    inits[2] = numpy_helper.from_array(fw[:, :35].copy(), "fw")
    save(model(nodes, [f32("x", ["batch", 1, 6, 6])], [f32("y", ["batch", 5])], inits), os.path.join(out, "wrong_initializer.onnx"))

    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("RandomUniformLike", ["r"], ["v"]),
        helper.make_node("RandomNormalLike", ["v"], ["y"]),
    ]
    save(model(nodes, [f32("x", [3, 4])], [f32("y", [3, 4])], []), os.path.join(out, "unsupported.onnx"))

    onnx.save(_gelu17(), os.path.join(out, "gelu_opset17.onnx"))

    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT8, name="to_u8")]
    save(model(nodes, [f32("x", [3])], [helper.make_tensor_value_info("y", TensorProto.UINT8, [3])]), os.path.join(out, "cast_uint8.onnx"))

    nodes = [helper.make_node("Relu", ["nowhere"], ["y"], name="lost")]
    save(model(nodes, [f32("x", [3])], [f32("y", [3])]), os.path.join(out, "dangling.onnx"), check=False)


def _gelu17():
    # onnx.checker refuses an op outside the opset, so this one is put together unchecked.
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], name="act")], "g", [f32("x", [3])], [f32("y", [3])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


if __name__ == "__main__":
    main(sys.argv[1])
