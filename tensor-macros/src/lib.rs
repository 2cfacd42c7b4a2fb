//! Procedural macros of tensor-core. Users reach them through `tensor_core::prelude`;
//! the generated code only names paths under `::tensor_core::__private`.
