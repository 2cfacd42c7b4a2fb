//! The crate's layers, bottom up, and the test that keeps them so: a module may import
//! (`use crate::…` or a `crate::…` path) only modules of its own layer or below, and the
//! imports must not form a cycle. A new module must be given a layer here. The test reads
//! whole files, skipping comments, literals and `#[cfg(test)]` items (test modules, inline
//! or in files of their own), and a name of the crate root (`crate::DType`) counts as an
//! import of the module it comes from (`dtype`), as `lib.rs` re-exports it. Only eager
//! dispatch (`ops`) and the lowering (`compile`) may import `kernels` (`KERNEL_USERS`).
//!
//! ```text
//! deploy      export  onnx  distributed  graphs that run without the source; ONNX; MPI jobs
//! models      nn  optim  data         layers, losses, optimizers (and their state dicts); datasets
//! saving      io                      state dicts, safetensors checkpoints
//! function    function                #[graph_fn]: signatures, cache, ConcreteFunction; gradients through calls
//! control     control                 cond, while_loop, the macro's if/while; the one graph replay
//! compile     compile                 passes, plan, lowering, executors (CPU; GPU with `cuda`)
//! trace       trace                   the tracer: builds graphs, implements the executor seam
//! graph IR    graph  autograd         the IR the tracer writes; backward engine and API
//! ops         ops  random             Op families, dispatch (the executor seam); generators
//! tensor      tensor                  the handle, thread context, grad nodes
//! kernels     kernels  cuda           CPU loops, fused programs' compiler; the GPU backend
//! values      math  dim  error  storage  dtype  shape  device  switch   scalar functions, op kinds, fused programs described; symbolic dims and guards; settings from the environment
//! ```

/// Each layer's modules, bottom up.
const LAYERS: &[&[&str]] = &[
    &["dtype", "shape", "device", "switch"],
    &["error", "storage"],
    &["math", "dim"],
    &["kernels", "cuda"],
    &["tensor"],
    &["ops", "random"],
    &["graph", "autograd"],
    &["trace"],
    &["compile"],
    &["control"],
    &["function"],
    &["io"],
    &["nn", "optim", "data"],
    &["export", "onnx", "distributed"],
];

/// The only modules that may import `kernels` (the CPU loops, fused programs' compiler and
/// code generator), whatever their layer: eager dispatch, and the lowering of a graph to an
/// `Executable`. Everything else — the graph IR above all — holds descriptions, not code.
const KERNEL_USERS: &[&str] = &["ops", "compile"];

#[cfg(test)]
mod tests {
    use super::{KERNEL_USERS, LAYERS};
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

    /// `source` with its comments and its string and char literals blanked (so a brace or a
    /// `crate::` inside one counts for nothing), line breaks kept.
    fn strip_comments_and_literals(source: &str) -> String {
        let s: Vec<char> = source.chars().collect();
        let (mut out, mut i) = (String::with_capacity(source.len()), 0);
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        while i < s.len() {
            let (c, next) = (s[i], s.get(i + 1).copied());
            if c == '/' && next == Some('/') {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && next == Some('*') {
                i += 2;
                while i + 1 < s.len() && !(s[i] == '*' && s[i + 1] == '/') {
                    out.extend((s[i] == '\n').then_some('\n'));
                    i += 1;
                }
                i += 2;
            } else if c == 'r' && matches!(next, Some('"' | '#')) && (i == 0 || !ident(s[i - 1])) {
                let hashes = s[i + 1..].iter().take_while(|&&h| h == '#').count();
                if s.get(i + 1 + hashes) != Some(&'"') {
                    out.push(c);
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                while i < s.len() && !(s[i] == '"' && s[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes) {
                    out.extend((s[i] == '\n').then_some('\n'));
                    i += 1;
                }
                i += 1 + hashes;
                out.push_str("\"\"");
            } else if c == '"' {
                i += 1;
                while i < s.len() && s[i] != '"' {
                    out.extend((s[i] == '\n').then_some('\n'));
                    i += if s[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            } else if c == '\'' && (next == Some('\\') || s.get(i + 2) == Some(&'\'')) {
                // A char literal (a lifetime has no closing quote right after one char).
                i += if next == Some('\\') { 3 } else { 1 };
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        }
        out
    }

    /// The end of the item that starts at `at` (after its attributes): its `;`, or its
    /// block's closing brace.
    fn item_end(code: &str, at: usize) -> usize {
        let mut depth = 0usize;
        for (i, c) in code[at..].char_indices() {
            match c {
                ';' if depth == 0 => return at + i + 1,
                '{' | '[' | '(' => depth += 1,
                '}' | ']' | ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && c == '}' {
                        return at + i + 1;
                    }
                }
                _ => {}
            }
        }
        code.len()
    }

    /// `code` without its `#[cfg(test)]` items (a test module, or a `use` or `fn` compiled
    /// only for tests), and the names of the test modules it declares in files of their own
    /// (`#[cfg(test)] mod tests;`).
    fn without_test_items(code: &str) -> (String, Vec<String>) {
        let (mut out, mut rest, mut test_files) = (String::new(), code, Vec::new());
        while let Some(at) = rest.find("#[cfg(test)]") {
            out.push_str(&rest[..at]);
            let end = item_end(rest, at + "#[cfg(test)]".len());
            let item = rest[at..end].trim_end_matches(';');
            if let Some(name) = item.rsplit_once("mod ").map(|(_, n)| n.trim()).filter(|n| !n.contains('{')) {
                test_files.push(name.to_string());
            }
            out.extend(rest[at..end].chars().filter(|&c| c == '\n'));
            rest = &rest[end..];
        }
        out.push_str(rest);
        (out, test_files)
    }

    /// The module each name of the crate root comes from (`DType` -> `dtype`), read from
    /// `lib.rs`'s top-level `use`s.
    fn root_names() -> BTreeMap<String, String> {
        let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs is readable");
        let code = strip_comments_and_literals(&lib);
        let mods = modules();
        let mut out = BTreeMap::new();
        for stmt in code.split(';') {
            // The statement without the attributes and block ends before it.
            let lines: Vec<&str> = stmt.lines().map(str::trim_start).skip_while(|l| l.is_empty() || l.starts_with(['#', '}'])).collect();
            let stmt = lines.join(" ");
            let Some(path) = stmt.strip_prefix("pub use ").or_else(|| stmt.strip_prefix("pub(crate) use ")) else { continue };
            let Some((module, names)) = path.split_once("::") else { continue };
            if !mods.iter().any(|m| m == module) {
                continue;
            }
            let words: Vec<&str> = names.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).filter(|w| !w.is_empty()).collect();
            for w in words.iter().filter(|w| !w.ends_with("::")) {
                let name = w.rsplit("::").next().unwrap_or(w);
                out.entry(name.to_string()).or_insert_with(|| module.to_string());
            }
        }
        out
    }

    /// The module every `crate::` path in non-test code names, including each top-level
    /// name of a grouped `use crate::{a::…, b}`; a name of the crate root counts as the
    /// module it comes from (`roots`).
    fn imported(code: &str, roots: &BTreeMap<String, String>) -> BTreeSet<String> {
        let word = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
        let module_of = |w: String| roots.get(&w).cloned().unwrap_or(w);
        let mut names = BTreeSet::new();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                names.extend(group_names(group).into_iter().map(|n| module_of(word(&n))));
            } else {
                names.insert(module_of(word(rest)));
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
        names.iter().map(|n| n.trim_start_matches([',', ' ', '\n']).to_string()).collect()
    }

    /// Module -> the crate modules it imports, with a file that does.
    fn imports() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
        let (mods, roots) = (modules(), root_names());
        let mut out: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
        for m in &mods {
            let files = files_of(m);
            let mut test_files = BTreeSet::new();
            let mut codes = Vec::new();
            for f in &files {
                let source = std::fs::read_to_string(f).expect("a source file");
                let (code, tests) = without_test_items(&strip_comments_and_literals(&source));
                let dir = match f.file_name().is_some_and(|n| n == "mod.rs") {
                    true => f.parent().expect("a folder").to_path_buf(),
                    false => f.with_extension(""),
                };
                for t in tests {
                    test_files.insert(dir.join(format!("{t}.rs")));
                    test_files.insert(dir.join(&t).join("mod.rs"));
                }
                codes.push((f.clone(), code));
            }
            for (f, code) in codes.into_iter().filter(|(f, _)| !test_files.contains(f)) {
                for n in imported(&code, &roots) {
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
    fn only_dispatch_and_lowering_import_the_kernels() {
        let wrong: Vec<String> = imports()
            .into_iter()
            .filter(|(m, _)| m != "kernels" && !KERNEL_USERS.contains(&m.as_str()))
            .filter_map(|(m, deps)| {
                deps.get("kernels").map(|file| format!("{} imports `kernels` from `{m}`", file.strip_prefix(src()).unwrap_or(file).display()))
            })
            .collect();
        assert!(wrong.is_empty(), "only {KERNEL_USERS:?} may import the kernels (the graph holds descriptions):\n{}", wrong.join("\n"));
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

    /// The scanner sees grouped imports and root names, and ignores comments, literals and
    /// test items, but not the code after them.
    #[test]
    fn the_scanner_reads_paths_groups_and_root_names_and_skips_comments_literals_and_tests() {
        let source = "use crate::{ops::Op, tensor::{Tensor, context}};\n// crate::compile\nfn f() { crate::graph::render(\"crate::io\") }\n\
                      #[cfg(test)]\nuse crate::function;\n#[cfg(test)]\nmod tests {\n    use crate::control;\n    fn g() { '}'; }\n}\n\
                      fn h(d: crate::DType) -> crate::random::Generator { todo!() }";
        let (code, test_files) = without_test_items(&strip_comments_and_literals(source));
        let roots = BTreeMap::from([("DType".to_string(), "dtype".to_string())]);
        let found: Vec<String> = imported(&code, &roots).into_iter().collect();
        assert_eq!(found, ["dtype", "graph", "ops", "random", "tensor"]);
        assert!(test_files.is_empty());
        assert_eq!(without_test_items("#[cfg(test)]\nmod tests;\nfn f() {}").1, ["tests"]);
    }

    #[test]
    fn root_names_map_to_their_modules() {
        let roots = root_names();
        assert_eq!((roots["DType"].as_str(), roots["Result"].as_str(), roots["Tensor"].as_str()), ("dtype", "error", "tensor"));
    }
}
