//! State dicts written by PyTorch (`tests/fixtures/make_torch_fixtures.py`) load as they are
//! into tensor-core's own `nn` layers — PyTorch's names and layouts: `Linear`'s weight
//! `[out, in]`, `Conv2d`'s OIHW, nanoGPT's `c_attn`/`c_proj`, a `Sequential`'s `body.0.weight`
//! — and reproduce PyTorch's outputs, eagerly and as graph functions (graph == eager bit for
//! bit).

use std::path::PathBuf;
use tensor_core::io;
use tensor_core::nn::{CausalSelfAttention, Conv2d, Embedding, Gelu, LayerNorm, Linear, Module, ReLU, Sequential};
use tensor_core::prelude::*;
use tests::{as_f64, assert_bits_eq};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// The tensors of a fixture file, by name.
struct Fixture(Vec<(String, Tensor)>);

impl Fixture {
    fn load(name: &str) -> Result<Fixture> {
        Ok(Fixture(io::load_tensors(fixture(name))?))
    }

    fn get(&self, name: &str) -> Tensor {
        self.0.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("the fixture has no `{name}`")).1.clone()
    }
}

/// `got` is PyTorch's `want` up to float rounding: each element within 1e-6 of the largest
/// magnitude in `want` (both sum in f32, in different orders).
fn assert_matches_pytorch(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let (got, want) = (as_f64(got), as_f64(want));
    let scale = want.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-6 * scale, "{what}[{i}]: {g} vs PyTorch's {w} (scale {scale})");
    }
}

/// Names in a state dict, sorted (a safetensors file keeps them sorted).
fn sorted_names(named: &[(String, Tensor)]) -> Vec<String> {
    let mut names: Vec<String> = named.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    names
}

// ------------------------------------------------------------------------- a ModuleList MLP

/// `make_torch_fixtures.py`'s `Mlp`: `nn.ModuleList([Linear(4, 16), Linear(16, 16),
/// Linear(16, 3)])`, tanh then relu between them.
#[derive(GraphArg)]
struct TorchMlp {
    layers: Vec<Linear>,
}

impl TorchMlp {
    fn new() -> Result<TorchMlp> {
        let rng = &Generator::new(0);
        Ok(TorchMlp {
            layers: vec![Linear::new(4, 16, DType::F32, rng)?, Linear::new(16, 16, DType::F32, rng)?, Linear::new(16, 3, DType::F32, rng)?],
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.layers[0].forward(x)?.tanh()?;
        let h = self.layers[1].forward(&h)?.relu()?;
        self.layers[2].forward(&h)
    }

    #[graph_fn]
    fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.forward(x)
    }
}

#[test]
fn a_module_list_of_linears_written_by_pytorch_loads_into_nn_linear() -> Result<()> {
    let mut mlp = TorchMlp::new()?;
    io::load_safetensors(&mut mlp, fixture("torch_mlp.safetensors"))?;
    assert_eq!(mlp.layers[0].weight().dims(), vec![16, 4], "PyTorch's [out, in], as stored");
    let data = Fixture::load("torch_mlp_io.safetensors")?;
    let (x, y) = (data.get("x"), data.get("y"));
    let eager = mlp.forward(&x)?;
    assert_matches_pytorch(&eager, &y, "eager");
    assert_bits_eq(&mlp.predict(&x)?, &eager);
    // Written back, the names are PyTorch's.
    let path = std::env::temp_dir().join(format!("tc-pytorch-mlp-{}.safetensors", std::process::id()));
    io::save_safetensors(&mlp, &path)?;
    let names = sorted_names(&io::load_tensors(&path)?);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(names, sorted_names(&io::load_tensors(fixture("torch_mlp.safetensors"))?));
    Ok(())
}

// ------------------------------------------------------------------------- single layers

/// `make_torch_fixtures.py`'s `Layers`: an embedding, nanoGPT's attention block, a layer norm
/// and a convolution (stride 2, padding 1).
#[derive(GraphArg)]
struct TorchLayers {
    wte: Embedding,
    attn: CausalSelfAttention,
    ln: LayerNorm,
    conv: Conv2d,
}

impl TorchLayers {
    fn new() -> Result<TorchLayers> {
        let rng = &Generator::new(1);
        Ok(TorchLayers {
            wte: Embedding::new(11, 8, DType::F32, rng)?,
            attn: CausalSelfAttention::new(8, 2, DType::F32, rng)?,
            ln: LayerNorm::new(8, 1e-5, DType::F32)?,
            conv: Conv2d::new(2, 3, [3, 3], DType::F32, rng)?.with_stride([2, 2]).with_padding([1, 1]),
        })
    }

    /// Each layer's output: the embedding, the attention on it, the norm of that, and the
    /// convolution of the image.
    fn outputs(&self, tokens: &Tensor, image: &Tensor) -> Result<Vec<Tensor>> {
        let embedded = self.wte.forward(tokens)?;
        let attended = self.attn.forward(&embedded)?;
        let normed = self.ln.forward(&attended)?;
        Ok(vec![embedded, attended, normed, self.conv.forward(image)?])
    }

    #[graph_fn]
    fn outputs_graph(&self, tokens: &Tensor, image: &Tensor) -> Result<Vec<Tensor>> {
        self.outputs(tokens, image)
    }
}

#[test]
fn embedding_attention_layer_norm_and_conv_written_by_pytorch_reproduce_its_outputs() -> Result<()> {
    let mut layers = TorchLayers::new()?;
    io::load_safetensors(&mut layers, fixture("torch_layers.safetensors"))?;
    let data = Fixture::load("torch_layers_io.safetensors")?;
    let (tokens, image) = (data.get("tokens"), data.get("image"));
    let eager = layers.outputs(&tokens, &image)?;
    for (got, name) in eager.iter().zip(["embedded", "attended", "normed", "convolved"]) {
        assert_matches_pytorch(got, &data.get(name), name);
    }
    for (graph, eager) in layers.outputs_graph(&tokens, &image)?.iter().zip(&eager) {
        assert_bits_eq(graph, eager);
    }
    Ok(())
}

// ------------------------------------------------------------------------- a Sequential

/// `make_torch_fixtures.py`'s `Classifier`: `self.body = nn.Sequential(Linear(4, 32), ReLU(),
/// LayerNorm(32), Linear(32, 32), GELU(), Linear(32, 3))`, the model of the
/// `port_from_pytorch` example.
#[derive(GraphArg)]
struct Classifier {
    body: Sequential,
}

impl Classifier {
    fn new() -> Result<Classifier> {
        let rng = &Generator::new(2);
        let body = Sequential::new()
            .add(Linear::new(4, 32, DType::F32, rng)?)
            .add(ReLU)
            .add(LayerNorm::new(32, 1e-5, DType::F32)?)
            .add(Linear::new(32, 32, DType::F32, rng)?)
            .add(Gelu::new())
            .add(Linear::new(32, 3, DType::F32, rng)?);
        Ok(Classifier { body })
    }

    #[graph_fn]
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        self.body.forward(x)
    }
}

#[test]
fn a_sequential_written_by_pytorch_loads_strictly_under_its_names() -> Result<()> {
    let mut model = Classifier::new()?;
    let file = fixture("torch_classifier.safetensors");
    assert_eq!(sorted_names(&model.state_dict()?), sorted_names(&io::load_tensors(&file)?), "the same keys, body.0.weight ...");
    io::load_safetensors(&mut model, &file)?;
    let data = Fixture::load("torch_classifier_io.safetensors")?;
    let x = data.get("x");
    let eager = model.body.forward(&x)?;
    assert_matches_pytorch(&eager, &data.get("logits_before"), "logits");
    assert_bits_eq(&model.logits(&x)?, &eager);
    Ok(())
}
