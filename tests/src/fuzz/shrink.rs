//! Reduces a failing program to a small one that still fails: drops the gradient and
//! outputs, deletes steps (letting their users read an operand of the same type instead),
//! inlines `cond` branches and loop bodies, and drops unused inputs, until no change helps.

use super::program::{Block, GradMode, Id, Node, Program, Step};

/// Where a step is: the indices of the enclosing steps and blocks, then its own index.
type Path = Vec<(usize, usize)>;

/// The smallest program reachable from `p` by the reductions above for which `fails` still
/// holds (`p` itself must fail).
///
/// ```
/// use tests::fuzz::{generate, shrink, Config, Node};
/// let p = generate(3, 0, &Config::default());
/// // "Fails" while the program still has a matmul: shrinking keeps one and little else.
/// let has_matmul = |q: &tests::fuzz::Program| format!("{:?}", q.body).contains("Matmul");
/// if has_matmul(&p) {
///     let s = shrink(&p, &has_matmul);
///     assert!(has_matmul(&s) && s.op_count() <= p.op_count());
/// }
/// ```
pub fn shrink(p: &Program, fails: &dyn Fn(&Program) -> bool) -> Program {
    let mut best = p.clone();
    loop {
        let before = size(&best);
        for candidate in candidates(&best) {
            if size(&candidate) < size(&best) && fails(&candidate) {
                best = candidate;
            }
        }
        if size(&best) >= before {
            return best;
        }
    }
}

/// A measure that every accepted reduction lowers.
fn size(p: &Program) -> (usize, usize, usize) {
    let flags = p.inputs.iter().filter(|(_, s)| s.requires_grad || s.capture).count() + p.preset_grads as usize;
    let grad = !matches!(p.grad, GradMode::None) as usize;
    (p.op_count() + p.body.results.len() + p.inputs.len(), grad, flags)
}

/// Every one-step reduction of `p`.
fn candidates(p: &Program) -> Vec<Program> {
    let mut out = Vec::new();
    if !matches!(p.grad, GradMode::None) {
        out.push(Program { grad: GradMode::None, preset_grads: false, ..p.clone() });
    }
    if p.preset_grads {
        out.push(Program { preset_grads: false, ..p.clone() });
    }
    let keep_last = !matches!(p.grad, GradMode::None) as usize;
    for k in 0..p.body.results.len().saturating_sub(keep_last) {
        if p.body.results.len() > 1 {
            let mut q = p.clone();
            q.body.results.remove(k);
            out.push(q);
        }
    }
    for path in step_paths(&p.body, &mut Vec::new()) {
        out.extend(delete_step(p, &path));
        out.extend(inline_control(p, &path));
    }
    out.extend(drop_unused_inputs(p));
    for k in 0..p.inputs.len() {
        let mut q = p.clone();
        let spec = &mut q.inputs[k].1;
        if spec.requires_grad || spec.capture {
            spec.requires_grad = false;
            spec.capture = false;
            out.push(q);
        }
    }
    out
}

fn step_paths(b: &Block, prefix: &mut Path) -> Vec<Path> {
    let mut out = Vec::new();
    for (i, s) in b.steps.iter().enumerate() {
        for (j, inner) in s.node.blocks().iter().enumerate() {
            prefix.push((i, j));
            out.extend(step_paths(inner, prefix));
            prefix.pop();
        }
        let mut path = prefix.clone();
        path.push((i, usize::MAX));
        out.push(path);
    }
    out
}

/// The block holding the step at `path`, and the step's index in it.
fn block_of<'a>(p: &'a mut Program, path: &Path) -> (&'a mut Block, usize) {
    let mut b = &mut p.body;
    for &(i, j) in &path[..path.len() - 1] {
        b = b.steps[i].node.blocks_mut().into_iter().nth(j).expect("a block on the path");
    }
    (b, path[path.len() - 1].0)
}

fn renamed(p: &mut Program, map: &[(Id, Id)]) {
    let f = |v: Id| map.iter().find(|(from, _)| *from == v).map_or(v, |(_, to)| *to);
    p.body.rename(&f);
}

/// The step at `path` deleted, its outputs replaced by each same-typed operand (or unused).
fn delete_step(p: &Program, path: &Path) -> Vec<Program> {
    let mut q = p.clone();
    let (block, i) = block_of(&mut q, path);
    let step: Step = block.steps.remove(i);
    let mut out = vec![q.clone()];
    if step.outs.len() == 1 {
        for o in step.node.operands() {
            if p.ty(o) == p.ty(step.outs[0]) {
                let mut r = q.clone();
                renamed(&mut r, &[(step.outs[0], o)]);
                out.push(r);
            }
        }
    }
    out
}

/// A `cond` replaced by one of its branches, or a `while_loop` by its initial values or by
/// one pass of its body.
fn inline_control(p: &Program, path: &Path) -> Vec<Program> {
    let mut q = p.clone();
    let (block, i) = block_of(&mut q, path);
    let step = block.steps[i].clone();
    let mut out = Vec::new();
    match &step.node {
        Node::Cond { then, other, .. } => {
            for branch in [then, other] {
                out.push(hoist(&q, path, branch.steps.clone(), step.outs.iter().copied().zip(branch.results.iter().copied()).collect()));
            }
        }
        Node::While { vars, body, .. } => {
            out.push(hoist(&q, path, vec![], step.outs.iter().copied().zip(vars.iter().copied()).collect()));
            let mut body = body.clone();
            let params: Vec<(Id, Id)> = body.params.iter().copied().zip(vars.iter().copied()).collect();
            body.rename(&|v| params.iter().find(|(f, _)| *f == v).map_or(v, |(_, t)| *t));
            out.push(hoist(&q, path, body.steps, step.outs.iter().copied().zip(body.results.iter().copied()).collect()));
        }
        _ => {}
    }
    out
}

/// The step at `path` replaced by `steps`, with its outputs renamed by `map`.
fn hoist(q: &Program, path: &Path, steps: Vec<Step>, map: Vec<(Id, Id)>) -> Program {
    let mut r = q.clone();
    let (block, i) = block_of(&mut r, path);
    block.steps.splice(i..=i, steps);
    renamed(&mut r, &map);
    r
}

fn drop_unused_inputs(p: &Program) -> Option<Program> {
    let mut reads = Vec::new();
    p.body.reads(&mut reads);
    let mut q = p.clone();
    q.inputs.retain(|(id, _)| reads.contains(id));
    (q.inputs.len() < p.inputs.len()).then_some(q)
}
