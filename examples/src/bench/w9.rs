//! W9: imported ONNX models served — torchvision's ResNet-18 at batch 1 and 8 and
//! MobileNetV2 at batch 1, inference on f32[B, 3, 224, 224], as exported by
//! `scripts/onnx_real_models.py` (random weights from a fixed seed, opset 17).
//!
//! The models are not committed (45 MB and 14 MB): the bench reads them from the folder of
//! `--models DIR` or of the `TENSOR_CORE_ONNX_MODELS` environment variable, and says how
//! to make them when they are missing.

use std::path::{Path, PathBuf};
use tensor_core::function::ConcreteFunction;
use tensor_core::onnx::OnnxModel;
use tensor_core::prelude::*;

/// W9's cases: the model's folder name under the models folder, and the batch.
pub const CASES: [(&str, usize); 3] = [("resnet18", 1), ("resnet18", 8), ("mobilenet_v2", 1)];

/// The environment variable that names the models folder when `--models` is not given.
pub const MODELS_ENV: &str = "TENSOR_CORE_ONNX_MODELS";

/// How to make the models, for the errors that find them missing.
const HOW_TO_MAKE: &str = "W9 reads the ONNX models that scripts/onnx_real_models.py writes: run \
     `python -m pip install torch torchvision onnx onnxruntime` and \
     `python scripts/onnx_real_models.py DIR resnet18 mobilenet_v2`, \
     then pass `--models DIR` or set TENSOR_CORE_ONNX_MODELS=DIR";

fn missing(reason: String) -> Error {
    Error::InvalidArgument { op: "bench W9", arg: "models", reason: format!("{reason}. {HOW_TO_MAKE}") }
}

/// The models folder: `option`, else `$TENSOR_CORE_ONNX_MODELS`, else an error saying how
/// to make one.
pub fn models_dir(option: Option<&Path>) -> Result<PathBuf> {
    match option.map(Path::to_path_buf).or_else(|| std::env::var_os(MODELS_ENV).map(PathBuf::from)) {
        Some(dir) => Ok(dir),
        None => Err(missing(format!("no models folder: neither --models nor {MODELS_ENV} is set"))),
    }
}

/// `dir/<name>/model.onnx`, or an error saying it is missing and how to make it.
pub fn model_path(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name).join("model.onnx");
    match path.is_file() {
        true => Ok(path),
        false => Err(missing(format!("{} is not there", path.display()))),
    }
}

/// The case's name in the bench's lines: `resnet18_b8`.
pub fn case_name(name: &str, batch: usize) -> String {
    format!("{name}_b{batch}")
}

/// The input of a case: f32[batch, 3, 224, 224] from a fixed seed.
pub fn input(batch: usize) -> Tensor {
    Tensor::randn(&[batch, 3, 224, 224], DType::F32, 9)
}

/// The imported model traced for `x`'s shape, without gradients: the graph the bench calls.
pub fn traced(model: &OnnxModel, x: &Tensor) -> Result<ConcreteFunction> {
    no_grad(|| ConcreteFunction::trace("w9", &[("input", x)], || model.call(&[x])))
}

/// tract-onnx's plan of the model for a fixed batch (feature `tract`).
#[cfg(feature = "tract")]
pub mod tract {
    use std::path::Path;
    use tensor_core::prelude::*;
    use tract_onnx::prelude::{tvec, DatumExt, Framework, InferenceModelExt, IntoTensor, TValue};

    /// What tract runs: the optimized, planned model.
    pub type Plan = tract_onnx::prelude::TypedRunnableModel<tract_onnx::prelude::TypedModel>;

    fn tract_error(what: &str, e: impl std::fmt::Display) -> Error {
        Error::InvalidArgument { op: "bench W9 tract", arg: "model", reason: format!("{what}: {e}") }
    }

    /// The model at `path`, its input fixed to `x`'s shape, optimized and planned by tract.
    pub fn plan(path: &Path, x: &Tensor) -> Result<Plan> {
        let model = tract_onnx::onnx().model_for_path(path).map_err(|e| tract_error("tract reads the model", e))?;
        let model = model.with_input_fact(0, f32::fact(x.dims().as_slice()).into()).map_err(|e| tract_error("tract fixes the input shape", e))?;
        let model = model.into_optimized().map_err(|e| tract_error("tract optimizes the model", e))?;
        model.into_runnable().map_err(|e| tract_error("tract plans the model", e))
    }

    /// `x` as tract's input value.
    pub fn input(x: &Tensor) -> Result<TValue> {
        let values = x.to_vec::<f32>()?;
        let array =
            tract_onnx::prelude::tract_ndarray::ArrayD::from_shape_vec(x.dims().as_slice(), values).map_err(|e| tract_error("the input", e))?;
        Ok(array.into_tensor().into())
    }

    /// One inference; its outputs dropped.
    pub fn run(plan: &Plan, x: &TValue) -> Result<()> {
        plan.run(tvec!(x.clone())).map(drop).map_err(|e| tract_error("tract runs the model", e))
    }
}
