//! The crate's layers, bottom up, and the test that keeps them so: a module may import
//! (`use crate::…` or a `crate::…` path) only modules of its own layer or below, and the
//! imports must not form a cycle. A new module must be given a layer here.
//!
//! ```text
//! deploy      export  onnx  distributed  graphs that run without the source; ONNX; MPI jobs
//! models      nn  optim  data         layers, losses, optimizers (and their state dicts); datasets
//! saving      io                      state dicts, safetensors checkpoints
//! control     control                 cond, while_loop, the macro's if/while
//! function    function                #[graph_fn]: signatures, cache, ConcreteFunction
//! compile     compile                 passes, plan, executor
//! trace       trace                   the tracer: builds graphs, implements the executor seam
//! graph IR    graph  autograd         the IR the tracer writes; backward engine and API
//! ops         ops  random             Op families, dispatch (the executor seam); generators
//! tensor      tensor                  the handle, thread context, grad nodes
//! kernels     kernels  cuda           CPU loops, fused programs; the GPU backend
//! values      math  error  storage  dtype  shape  device
//! ```

/// Each layer's modules, bottom up.
const LAYERS: &[&[&str]] = &[
    &["dtype", "shape", "device"],
    &["error", "storage"],
    &["math"],
    &["kernels", "cuda"],
    &["tensor"],
    &["ops", "random"],
    &["graph", "autograd"],
    &["trace"],
    &["compile"],
    &["function"],
    &["control"],
    &["io"],
    &["nn", "optim", "data"],
    &["export", "onnx", "distributed"],
];

#[cfg(test)]
mod tests {
    use super::LAYERS;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    fn layer_of(module: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&module))
    }

    /// The top-level modules of the crate (files and folders of `src/` but `lib.rs` and this).
    fn modules() -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(src()).expect("src/ is readable") {
            let path = e.expect("an entry").path();
            let name = path.file_stem().expect("a name").to_string_lossy().to_string();
            if name != "lib" && name != "layers" && name != "guide" && (path.is_dir() || path.extension().is_some_and(|x| x == "rs")) {
                out.push(name);
            }
        }
        out
    }

    fn files_of(module: &str) -> Vec<PathBuf> {
        let (file, dir) = (src().join(format!("{module}.rs")), src().join(module));
        let mut out: Vec<PathBuf> = file.exists().then_some(file).into_iter().collect();
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else { continue };
            for e in entries {
                let p = e.expect("an entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The first path segment of every `crate::` path in non-test, non-comment code,
    /// including each top-level name of a grouped `use crate::{a::…, b}`.
    fn imported(source: &str) -> BTreeSet<String> {
        let code: String =
            source.split("#[cfg(test)]").next().unwrap_or("").lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let mut names = BTreeSet::new();
        let mut rest = code.as_str();
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                names.extend(group_names(group));
            } else {
                names.insert(rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect());
            }
        }
        names
    }

    /// The top-level names of a `{a::b, c, d::{e, f}}` group.
    fn group_names(group: &str) -> Vec<String> {
        let (mut depth, mut names, mut current) = (0, Vec::new(), String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => names.push(std::mem::take(&mut current)),
                _ => {}
            }
            current.push(c);
        }
        names.push(current);
        names.iter().map(|n| n.trim_start_matches([',', ' ', '\n']).chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect()).collect()
    }

    /// Module -> the crate modules it imports, with a file that does.
    fn imports() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
        let mods = modules();
        let mut out: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
        for m in &mods {
            for f in files_of(m) {
                let source = std::fs::read_to_string(&f).expect("a source file");
                for n in imported(&source) {
                    if mods.contains(&n) && &n != m {
                        out.entry(m.clone()).or_default().entry(n).or_insert_with(|| f.clone());
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_module_has_a_layer() {
        let missing: Vec<String> = modules().into_iter().filter(|m| layer_of(m).is_none()).collect();
        assert!(missing.is_empty(), "give these modules a layer in src/layers.rs: {missing:?}");
    }

    #[test]
    fn no_module_imports_a_higher_layer() {
        let mut wrong = Vec::new();
        for (m, deps) in imports() {
            for (n, file) in deps {
                if let (Some(a), Some(b)) = (layer_of(&m), layer_of(&n))
                    && b > a
                {
                    wrong.push(format!("{} imports `{n}` (layer {b}) from `{m}` (layer {a})", file.strip_prefix(src()).unwrap_or(&file).display()));
                }
            }
        }
        assert!(wrong.is_empty(), "imports that run up the layers:\n{}", wrong.join("\n"));
    }

    #[test]
    fn imports_form_no_cycle() {
        let graph = imports();
        fn visit(
            m: &str,
            graph: &BTreeMap<String, BTreeMap<String, PathBuf>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|p| p == m) {
                return Some(path[at..].iter().cloned().chain([m.to_string()]).collect());
            }
            if !done.insert(m.to_string()) {
                return None;
            }
            path.push(m.to_string());
            for n in graph.get(m).map(|d| d.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                if let Some(cycle) = visit(&n, graph, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        for m in graph.keys() {
            let cycle = visit(m, &graph, &mut Vec::new(), &mut done);
            assert!(cycle.is_none(), "modules import each other in a cycle: {}", cycle.unwrap_or_default().join(" -> "));
        }
    }

    /// The scanner sees grouped imports and ignores comments and test code.
    #[test]
    fn the_scanner_reads_paths_groups_and_skips_comments_and_tests() {
        let found = imported("use crate::{ops::Op, tensor::{Tensor, context}};\n// crate::compile\nfn f() { crate::graph::render() }\n#[cfg(test)]\nuse crate::function;");
        assert_eq!(found, ["graph", "ops", "tensor"].iter().map(|s| s.to_string()).collect());
    }
}
