#!/usr/bin/env python3
"""Writes ONNX's backend node test cases, in the backend-test layout, for onnx_check.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install onnx numpy
    /tmp/venv/bin/python scripts/onnx_node_cases.py /tmp/onnx-cases
    cargo run --release -p examples --bin onnx_check -- /tmp/onnx-cases/node

Each case is a directory holding `model.onnx` and `test_data_set_N/{input,output}_K.pb`
(serialized TensorProtos). The node cases are generated from the case definitions the `onnx`
package ships (onnx/backend/test/case/node, what ONNX's `backend-test-tools generate-data`
writes); the pytorch-converted and pytorch-operator cases are copied from its data folder.
The `onnx` version decides the newest opset covered; it is printed.

`--subset FILE OUT` writes only the node cases FILE names (one a line, `#` comments), flat
into OUT: that is how tests/fixtures/onnx_node, which `cargo test` runs, was written.
Neither is needed by `cargo test` or `cargo run`.
"""

import argparse
import os
import shutil

import onnx
import onnx.defs
from onnx import numpy_helper
from onnx.backend.test import __file__ as backend_test_file
from onnx.backend.test.case import node as node_cases

COPIED_KINDS = ["pytorch-converted", "pytorch-operator"]


def write_tensor(path, value, name):
    with open(path, "wb") as f:
        if isinstance(value, onnx.TensorProto):
            f.write(value.SerializeToString())
        elif isinstance(value, list):
            f.write(numpy_helper.from_list(value, name).SerializeToString())
        elif value is None or isinstance(value, dict):
            # Optionals and maps: written as an empty optional, which the runner skips.
            f.write(onnx.OptionalProto(name=name).SerializeToString())
        else:
            f.write(numpy_helper.from_array(value, name).SerializeToString())


def write_case(case, out):
    case_dir = os.path.join(out, case.name)
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data_dir = os.path.join(case_dir, f"test_data_set_{i}")
        os.makedirs(data_dir)
        for j, value in enumerate(inputs):
            write_tensor(os.path.join(data_dir, f"input_{j}.pb"), value, graph.input[j].name)
        for j, value in enumerate(outputs):
            write_tensor(os.path.join(data_dir, f"output_{j}.pb"), value, graph.output[j].name)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="directory to write the cases into (node/ and the copied kinds)")
    parser.add_argument("--subset", help="a file naming the node cases to write (one a line), flat into OUT")
    args = parser.parse_args()
    print(f"onnx {onnx.__version__}, newest opset {onnx.defs.onnx_opset_version()}")
    cases = {c.name: c for c in node_cases.collect_testcases(None)}
    if args.subset:
        with open(args.subset) as f:
            names = [line.split("#")[0].strip() for line in f]
        names = [n for n in names if n]
        for name in names:
            write_case(cases[name], args.out)
        print(f"{len(names)} node cases written to {args.out}")
        return
    node_dir = os.path.join(args.out, "node")
    for case in cases.values():
        write_case(case, node_dir)
    print(f"node: {len(cases)} cases")
    data = os.path.join(os.path.dirname(backend_test_file), "data")
    for kind in COPIED_KINDS:
        dst = os.path.join(args.out, kind)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(os.path.join(data, kind), dst)
        print(f"{kind}: {len(os.listdir(dst))} cases")


if __name__ == "__main__":
    main()
