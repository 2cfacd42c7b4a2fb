#!/usr/bin/env python3
"""Exports real models to ONNX in the backend-test layout, with ONNX Runtime's outputs.

    python -m pip install torch torchvision transformers onnx onnxruntime
    python scripts/onnx_real_models.py /tmp/onnx-models              # all four
    python scripts/onnx_real_models.py /tmp/onnx-models small_cnn     # only the ones named

Each model is written as DIR/<name>/model.onnx beside test_data_set_0/input_K.pb (the
inputs, named as the model's inputs) and output_K.pb (what ONNX Runtime computes for them),
the layout `onnx_check` reads. Every model is exported by PyTorch's TorchScript exporter at
opset 17, with random weights from a fixed seed and a dynamic batch dim (`dim_param: batch`):

- resnet18: torchvision's ResNet-18, eval mode, input [1,3,224,224] (45 MB).
- mobilenet_v2: torchvision's MobileNetV2, eval mode, input [1,3,224,224] (14 MB): its
  depthwise convolutions are Conv nodes with `group` = channels.
- bert_tiny: a BERT-style encoder from transformers' `BertConfig` (2 layers, hidden 128,
  2 heads, intermediate 512, vocab 1000), inputs input_ids and attention_mask int64 [1,16]
  (the mask zeroes the last 4 positions), outputs last_hidden_state and pooler_output.
- small_cnn: conv 3->8 + batchnorm + relu, maxpool, conv 8->16 + batchnorm + relu, a
  depthwise conv 16->16 (group 16) + relu, global average pool, flatten, linear 16->10;
  input [2,3,16,16]. Under 30 KB, it is committed as tests/fixtures/onnx_models/small_cnn
  for the fine-tuning test and the `onnx_finetune` example. It is exported with
  `TrainingMode.PRESERVE`, so its batchnorms stay BatchNormalization nodes with random
  running statistics (not folded into the convs, as the eval-mode export of the others does),
  and import's BatchNormalization and its gradient are exercised.

The big models are not committed; docs/ONNX.md gives the command that checks them.
Neither cargo build nor cargo test runs this script.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

OPSET = 17
SEED = 0


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.depthwise = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.nn.functional.max_pool2d(x, 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        x = torch.relu(self.depthwise(x))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def randomize_batchnorms(model, gen):
    """Running statistics away from 0 and 1, so that a wrong BatchNormalization shows."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)


def image_model(name):
    import torchvision

    torch.manual_seed(SEED)
    model = {"resnet18": torchvision.models.resnet18, "mobilenet_v2": torchvision.models.mobilenet_v2}[name](weights=None)
    gen = torch.Generator().manual_seed(SEED)
    randomize_batchnorms(model, gen)
    x = torch.randn(1, 3, 224, 224, generator=gen)
    return model.eval(), (x,), ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}}


def small_cnn():
    torch.manual_seed(SEED)
    model = SmallCnn()
    gen = torch.Generator().manual_seed(SEED)
    randomize_batchnorms(model, gen)
    x = torch.randn(2, 3, 16, 16, generator=gen)
    return model.eval(), (x,), ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}}


def bert_tiny():
    from transformers import BertConfig, BertModel

    torch.manual_seed(SEED)
    config = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=512, max_position_embeddings=64, attn_implementation="eager")
    model = BertModel(config).eval()
    gen = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, 1000, (1, 16), generator=gen, dtype=torch.int64)
    mask = torch.ones(1, 16, dtype=torch.int64)
    mask[:, 12:] = 0

    class Encoder(torch.nn.Module):
        """Plain tensors in and out (BertModel returns a ModelOutput)."""

        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            return out.last_hidden_state, out.pooler_output

    axes = {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}, "last_hidden_state": {0: "batch"}, "pooler_output": {0: "batch"}}
    return Encoder(model).eval(), (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"], axes


MODELS = {
    "resnet18": lambda: image_model("resnet18"),
    "mobilenet_v2": lambda: image_model("mobilenet_v2"),
    "bert_tiny": bert_tiny,
    "small_cnn": small_cnn,
}


def export(name, out):
    model, args, input_names, output_names, axes = MODELS[name]()
    folder = os.path.join(out, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=OPSET, input_names=input_names, output_names=output_names,
                          dynamic_axes=axes, do_constant_folding=name != "small_cnn", dynamo=False,
                          training=torch.onnx.TrainingMode.PRESERVE if name == "small_cnn" else torch.onnx.TrainingMode.EVAL)
    onnx.checker.check_model(onnx.load(path))
    feeds = {n: a.numpy() for n, a in zip(input_names, args)}
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outputs = session.run(output_names, feeds)
    with torch.no_grad():
        torch_out = model(*args)
    torch_out = torch_out if isinstance(torch_out, tuple) else (torch_out,)
    for o, t in zip(outputs, torch_out):
        np.testing.assert_allclose(o, t.numpy(), rtol=1e-3, atol=1e-4)
    set_dir = os.path.join(folder, "test_data_set_0")
    for k, n in enumerate(input_names):
        with open(os.path.join(set_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for k, (n, o) in enumerate(zip(output_names, outputs)):
        with open(os.path.join(set_dir, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(o, n).SerializeToString())
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{name}: {os.path.getsize(path)} bytes, ops {', '.join(ops)}")


def main(argv):
    if not argv:
        sys.exit(__doc__)
    out, names = argv[0], argv[1:] or list(MODELS)
    for name in names:
        if name not in MODELS:
            sys.exit(f"unknown model {name}: one of {', '.join(MODELS)}")
        export(name, out)


if __name__ == "__main__":
    main(sys.argv[1:])
