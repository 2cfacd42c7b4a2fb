//! The execution plan, computed once per concrete function: the steps in order, for each
//! step the values that die there (freed at once) and the dying inputs a fused step may write
//! its outputs into, whether the run must re-check shapes (graphs with unknown dims), and
//! whether it runs on a worker thread (graphs whose kernels go parallel).

use crate::graph::{Graph, Node, NodeKind, StateWrite, ValueId};
use crate::kernels::{matmul::PARALLEL_FLOPS, parallel::PAR_MIN_LEN};
use crate::ops::{LinalgOp, Op};
use smallvec::SmallVec;

/// One step of the plan.
pub struct Step {
    pub node: Node,
    /// Values whose last use is this step (released after it).
    pub frees: SmallVec<[ValueId; 4]>,
    /// For each input: it dies here and nothing else keeps it, so its buffer may be reused.
    pub donate: SmallVec<[bool; 4]>,
    /// This step and the next are independent products of similar size, run side by side on
    /// one thread each (see `pair_products`); the run frees this step's dying values after
    /// the next step.
    pub with_next: bool,
    /// This step is a fused program whose outputs are large and read by no later step (they
    /// leave the call), so its generated loop writes them with streaming stores (see
    /// [`STREAM_MIN_BYTES`]).
    pub streams: bool,
}

/// Outputs at least this large that no later step of the call reads are written with
/// streaming (non-temporal) stores: an ordinary store first reads the line it writes into the
/// cache (write-allocate), a third of the traffic of `y = f(x)`, and the line would only
/// evict what the next call reads. Smaller outputs may still be in cache when the caller
/// reads them, so they are stored as usual. The bits are the same either way.
pub const STREAM_MIN_BYTES: usize = 4 << 20;

/// The plan of a graph.
pub struct Plan {
    pub steps: Vec<Step>,
    /// The graph leaves a dim unknown, so the shape rules checked while tracing held only for
    /// the known dims: each step re-checks its rule on the concrete shapes before its kernel
    /// runs, and state writes are checked before any is applied. False for graphs with every
    /// shape known, which then pay nothing for it.
    pub checks_shapes: bool,
    /// Some kernel of the graph may go parallel, so the run is handed to a worker thread
    /// (`kernels::parallel::on_worker`). False for small graphs, which run on the caller's
    /// thread and pay nothing for the hand-over.
    pub on_worker: bool,
}

impl Plan {
    pub fn new(g: &Graph) -> Plan {
        let checks_shapes = has_unknown_dims(g);
        let on_worker = checks_shapes || goes_parallel(g);
        let (nodes, pairs) = if on_worker && !checks_shapes { pair_products(g) } else { (g.nodes.iter().collect(), vec![]) };
        let mut last = vec![usize::MAX; g.values.len()];
        for (i, node) in nodes.iter().enumerate() {
            node.inputs.iter().for_each(|&v| last[v] = i);
        }
        let kept = kept_values(g);
        let steps = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let dies = |v: &ValueId| last[*v] == i && !kept[*v];
                let mut frees: SmallVec<[ValueId; 4]> = node.inputs.iter().copied().filter(dies).collect();
                frees.sort_unstable();
                frees.dedup();
                let donate = node
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(k, v)| dies(v) && !node.inputs[..k].contains(v) && !node.inputs[k + 1..].contains(v))
                    .collect();
                let donate = if matches!(node.kind, NodeKind::Fused(_)) { donate } else { SmallVec::from_elem(false, node.inputs.len()) };
                let streams = streams(g, node, &last);
                Step { node: (*node).clone(), frees, donate, with_next: pairs.contains(&i), streams }
            })
            .collect();
        Plan { steps, checks_shapes, on_worker }
    }
}

/// Products with fewer multiply-adds than this take about as long as handing one to another
/// worker, so they are not paired.
const SMALL_PRODUCT: f64 = 65536.0;

/// The multiply-adds of a node that is a product (or a product with an epilogue), from its
/// operands' and output's sizes; `None` for other nodes.
fn product_flops(g: &Graph, n: &Node) -> Option<f64> {
    let anchor = match &n.kind {
        NodeKind::Op(op) => op,
        NodeKind::Epilogue(e) => &e.anchor,
        _ => return None,
    };
    let numel = |v: ValueId| g.values[v].shape.numel() as f64;
    // m·k·n of a 2-d product is the square root of the operands' and output's sizes.
    matches!(anchor, Op::Linalg(LinalgOp::Matmul { .. })).then(|| (numel(n.inputs[0]) * numel(n.inputs[1]) * numel(n.outputs[0])).sqrt())
}

/// The nodes in the order the plan runs them, and the positions of the first step of each
/// pair run side by side.
///
/// Two large products of similar size (within 2x) that do not depend on each other — a
/// layer's two backward products, `d @ Wᵀ` and `hᵀ @ d` — run faster side by side, one thread
/// each, than in turn on both threads (`independent_product_timings` in `kernels/matmul.rs`:
/// 0.84x the time for W3's, 0.90x for W7's). Two small ones (below `PARALLEL_FLOPS`, so each
/// runs on one thread anyway) run side by side while the other worker would idle; products
/// under `SMALL_PRODUCT` are not worth handing over. The later product moves up to just after the
/// earlier one when every input it reads is made before it; nothing between them reads its
/// outputs (the graph is in topological order), so the move keeps every value's meaning.
/// Each product computes the same bits on one thread as on two (gemm splits the output
/// between threads, not the sums), so eager and graph still agree.
fn pair_products(g: &Graph) -> (Vec<&Node>, Vec<usize>) {
    let pairable = |n: &Node| product_flops(g, n).filter(|&f| f >= SMALL_PRODUCT);
    let matched = |a: f64, b: f64| {
        let both_large = a.min(b) >= PARALLEL_FLOPS as f64 && a.max(b) <= 2.0 * a.min(b);
        both_large || a.max(b) < PARALLEL_FLOPS as f64
    };
    let mut made_at = vec![0usize; g.values.len()]; // the position of the node making each value (0: an input)
    for (i, n) in g.nodes.iter().enumerate() {
        n.outputs.iter().for_each(|&v| made_at[v] = i + 1);
    }
    let mut order: Vec<&Node> = Vec::with_capacity(g.nodes.len());
    let mut pairs = Vec::new();
    let mut moved = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if moved[i] {
            continue;
        }
        order.push(n);
        let Some(fi) = pairable(n) else { continue };
        let partner = (i + 1..g.nodes.len()).find(|&j| {
            let m = &g.nodes[j];
            !moved[j] && pairable(m).is_some_and(|fj| matched(fi, fj)) && m.inputs.iter().all(|&v| made_at[v] <= i)
        });
        if let Some(j) = partner {
            moved[j] = true;
            pairs.push(order.len() - 1);
            order.push(&g.nodes[j]);
        }
    }
    (order, pairs)
}

/// True if some kernel of `g` may use several threads: a value of at least `PAR_MIN_LEN`
/// elements (elementwise kernels, reductions, convolutions), or a product of at least
/// `PARALLEL_FLOPS` multiply-adds.
fn goes_parallel(g: &Graph) -> bool {
    let large_product = |n: &Node| product_flops(g, n).is_some_and(|f| f >= PARALLEL_FLOPS as f64);
    g.values.iter().any(|v| v.shape.numel() >= PAR_MIN_LEN) || g.nodes.iter().any(large_product)
}

/// True if a value of `g` has an unknown dim (subgraphs of control flow decide for themselves
/// when their own plans are made).
fn has_unknown_dims(g: &Graph) -> bool {
    g.values.iter().any(|v| !v.shape.is_known())
}

/// Values that live to the end of the run: outputs and written-back values.
/// True when `node` is a fused program whose every output is known to be at least
/// [`STREAM_MIN_BYTES`] and is read by no step (`last` holds each value's last reading step).
fn streams(g: &Graph, node: &Node, last: &[usize]) -> bool {
    let large = |v: ValueId| {
        let info = &g.values[v];
        info.shape.is_known() && info.shape.numel() * info.dtype.size_of() >= STREAM_MIN_BYTES
    };
    matches!(node.kind, NodeKind::Fused(_)) && node.outputs.iter().all(|&v| last[v] == usize::MAX && large(v))
}

fn kept_values(g: &Graph) -> Vec<bool> {
    let mut keep = vec![false; g.values.len()];
    g.outputs.iter().for_each(|&v| keep[v] = true);
    for w in &g.writes {
        match w {
            StateWrite::Data { value, .. } | StateWrite::Grad { value: Some(value), .. } => keep[*value] = true,
            StateWrite::Grad { value: None, .. } => {}
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::Executable;
    use crate::dtype::DType;
    use crate::error::Result;
    use crate::function::ConcreteFunction;
    use crate::tensor::Tensor;

    /// A layer's backward products, `d @ Wᵀ` and `hᵀ @ d`, then something reading both; and
    /// an elementwise op on `big`, large enough for the graph to run on a worker (only such
    /// graphs pair their products).
    fn layer_backward(h: &Tensor, w: &Tensor, d: &Tensor, big: &Tensor) -> Result<Vec<Tensor>> {
        let dx = d.matmul_t(w, false, true)?;
        let dw = h.matmul_t(d, true, false)?;
        Ok(vec![dx.sum()?.add(&dw.sum()?)?, dx, dw, big.exp()?])
    }

    #[test]
    fn independent_products_run_side_by_side_with_eager_bits() -> Result<()> {
        // Small (64 x 96 x 80) and large (256 x 512 x 384) products: both kinds pair.
        for (m, k, n) in [(64, 96, 80), (256, 512, 384)] {
            let h = Tensor::randn(&[m, k], DType::F32, 1);
            let w = Tensor::randn(&[k, n], DType::F32, 2);
            let d = Tensor::randn(&[m, n], DType::F32, 3);
            let big = Tensor::randn(&[512, 256], DType::F32, 4);
            let args = [("h", &h), ("w", &w), ("d", &d), ("big", &big)];
            let f = ConcreteFunction::trace("layer_backward", &args, || layer_backward(&h, &w, &d, &big))?;
            let exe = Executable::new(f.traced_graph(), true);
            let plan = Plan::new(exe.graph());
            let pairs = plan.steps.iter().filter(|s| s.with_next).count();
            assert_eq!(pairs, 1, "{}", f.to_text());
            let ran = exe.run(&[&h, &w, &d, &big])?;
            let eager = layer_backward(&h, &w, &d, &big)?;
            for (g, e) in ran.iter().zip(&eager) {
                let bits = |t: &Tensor| t.to_vec::<f32>().map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
                assert_eq!(bits(g)?, bits(e)?, "({m}, {k}, {n})");
            }
        }
        Ok(())
    }

    #[test]
    fn a_product_reading_the_other_is_not_paired() -> Result<()> {
        let a = Tensor::randn(&[512, 512], DType::F32, 4);
        let f = ConcreteFunction::trace("chain", &[("a", &a)], || Ok(vec![a.matmul(&a)?.matmul(&a)?]))?;
        let plan = Plan::new(f.traced_graph());
        assert!(plan.on_worker);
        assert!(plan.steps.iter().all(|s| !s.with_next));
        Ok(())
    }

    #[test]
    fn small_graphs_run_on_the_callers_thread() -> Result<()> {
        let x = Tensor::ones(&[1], DType::F32);
        let f = ConcreteFunction::trace("plus_one", &[("x", &x)], || Ok(vec![x.add(1.0)?]))?;
        assert!(!Plan::new(f.traced_graph()).on_worker);
        let big = Tensor::ones(&[256, 256], DType::F32);
        let f = ConcreteFunction::trace("big_plus_one", &[("x", &big)], || Ok(vec![big.add(1.0)?]))?;
        assert!(Plan::new(f.traced_graph()).on_worker);
        Ok(())
    }

    /// W2's body: one fused program of `x`.
    fn w2(x: &Tensor) -> Result<Tensor> {
        x.mul(1.5)?.add(0.5)?.tanh()?.mul(&x.sigmoid()?)?.sub(&x.mul(0.5)?)
    }

    #[test]
    fn a_large_fused_output_that_leaves_the_call_streams_and_keeps_eager_bits() -> Result<()> {
        // 4 MiB of f32 streams; 4 MiB less one vector does not; the same output read by a
        // later step (a sum) does not either.
        let streaming = |n: usize, reduced: bool| -> Result<(bool, Tensor, Tensor)> {
            let x = Tensor::randn(&[n], DType::F32, 7);
            let body = || -> Result<Vec<Tensor>> {
                let y = w2(&x)?;
                Ok(if reduced { vec![y.sum()?] } else { vec![y] })
            };
            let f = ConcreteFunction::trace("w2", &[("x", &x)], body)?;
            let exe = Executable::new(f.traced_graph(), true);
            let streams = Plan::new(exe.graph()).steps.iter().any(|s| s.streams);
            Ok((streams, exe.run(&[&x])?.remove(0), body()?.remove(0)))
        };
        let n = STREAM_MIN_BYTES / 4;
        for (len, reduced, expected) in [(n, false, true), (n - 16, false, false), (n, true, false)] {
            let (streams, graph, eager) = streaming(len, reduced)?;
            assert_eq!(streams, expected, "{len} elements, reduced: {reduced}");
            let bits = |t: &Tensor| t.to_vec::<f32>().map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            assert!(bits(&graph)? == bits(&eager)?, "{len} elements, reduced: {reduced}: graph and eager differ");
        }
        Ok(())
    }
}
