//! The collectives and data-parallel training across real processes. Runs only with the `mpi`
//! feature, under mpirun (one test, so MPI is initialized and finalized once per process):
//!
//! ```sh
//! cargo test -p tensor-core --features mpi --test distributed --no-run   # prints the binary
//! mpirun --oversubscribe -np 2 target/debug/deps/distributed-<hash>
//! ```
//!
//! Started without mpirun it is a job of one, and still checks everything that makes sense
//! for one rank.
#![cfg(feature = "mpi")]

use std::time::Duration;
use tensor_core::distributed::{self, DataParallel, Reduce, ShardSampler};
use tensor_core::prelude::*;

/// Every rank's `x`, as f64 bits, so ranks can be compared bit for bit.
fn bits_everywhere(x: &Tensor) -> Result<Vec<Vec<u64>>> {
    let gathered = distributed::all_gather(&x.reshape([1, -1])?.cast(DType::F64)?)?;
    let n = distributed::size();
    let rows = gathered.to_vec::<f64>()?;
    Ok(rows.chunks(rows.len() / n).map(|r| r.iter().map(|v| v.to_bits()).collect()).collect())
}

fn same_on_every_rank(x: &Tensor) -> Result<()> {
    let all = bits_everywhere(x)?;
    assert!(all.windows(2).all(|w| w[0] == w[1]), "ranks differ: {all:?}");
    Ok(())
}

#[graph_fn]
fn reduced_step(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let loss = x.matmul(w)?.tanh()?.sum()?;
    loss.backward()?;
    distributed::average_gradients(std::slice::from_ref(w))?;
    distributed::all_reduce(&loss, Reduce::Mean)
}

#[test]
fn collectives_and_data_parallel_across_ranks() -> Result<()> {
    let world = distributed::init_with_timeout(Duration::from_secs(20))?;
    let (rank, n) = (world.rank(), world.size());
    let r = rank as f32;

    // all_reduce: sum and mean of values that differ per rank; the same bits everywhere.
    let x = Tensor::from_vec(vec![0.1f32 + r, 1.0 / (r + 3.0), -2.5 * r], &[3])?;
    let sum = distributed::all_reduce(&x, Reduce::Sum)?;
    let expect: Vec<f32> =
        (0..3).map(|i| (0..n).map(|k| [0.1f32 + k as f32, 1.0 / (k as f32 + 3.0), -2.5 * k as f32][i]).fold(0.0f32, |a, v| a + v)).collect();
    assert_eq!(sum.to_vec::<f32>()?, expect);
    same_on_every_rank(&sum)?;
    let mean = distributed::all_reduce(&x, Reduce::Mean)?;
    assert_eq!(mean.to_vec::<f32>()?, expect.iter().map(|v| v / n as f32).collect::<Vec<_>>());
    same_on_every_rank(&mean)?;

    // broadcast from the last rank, all_gather in rank order.
    let root = n - 1;
    let b = distributed::broadcast(&Tensor::from_vec(vec![rank as i64, 7], &[2])?, root)?;
    assert_eq!(b.to_vec::<i64>()?, vec![root as i64, 7]);
    let g = distributed::all_gather(&Tensor::from_vec(vec![r, r * 10.0], &[1, 2])?)?;
    assert_eq!(g.dims(), vec![n, 2]);
    assert_eq!(g.to_vec::<f32>()?, (0..n).flat_map(|k| [k as f32, k as f32 * 10.0]).collect::<Vec<_>>());

    // Gradients: d/dx_k sum_r (c_r · all_reduce_sum(x)_r) = sum_r c_r, on every rank.
    let xg = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?.requires_grad_(true)?;
    let c = rank as f64 + 1.0;
    distributed::all_reduce(&xg, Reduce::Sum)?.mul(c)?.sum()?.backward()?;
    let cs: f64 = (0..n).map(|k| k as f64 + 1.0).sum();
    assert_eq!(xg.grad().unwrap().to_vec::<f64>()?, vec![cs, cs]);
    // all_gather: rank k's rows of the summed output gradients.
    let xa = Tensor::from_vec(vec![1.0f64, 2.0], &[1, 2])?.requires_grad_(true)?;
    distributed::all_gather(&xa)?.mul(c)?.sum()?.backward()?;
    assert_eq!(xa.grad().unwrap().to_vec::<f64>()?, vec![cs, cs]);
    // broadcast: the root gets the sum, the others zeros.
    let xb = Tensor::from_vec(vec![3.0f64], &[1])?.requires_grad_(true)?;
    distributed::broadcast(&xb, root)?.mul(c)?.sum()?.backward()?;
    assert_eq!(xb.grad().unwrap().to_vec::<f64>()?, vec![if rank == root { cs } else { 0.0 }]);

    // A #[graph_fn] step with its own all-reduce gives the eager step's bits.
    let data = Tensor::from_vec((0..6).map(|i| (i as f32 + r) * 0.3).collect(), &[2, 3])?;
    let w0 = Tensor::from_vec(vec![0.5f32, -0.25, 0.125], &[3, 1])?;
    let eager_w = w0.clone().requires_grad_(true)?;
    tensor_core::function::run_functions_eagerly(true);
    let eager_loss = reduced_step(&eager_w, &data)?;
    tensor_core::function::run_functions_eagerly(false);
    let graph_w = w0.clone().requires_grad_(true)?;
    let graph_loss = reduced_step(&graph_w, &data)?;
    graph_w.zero_grad()?;
    let graph_loss2 = reduced_step(&graph_w, &data)?; // replayed from the cache
    let text = tensor_core::function::lookup("reduced_step").unwrap().concrete_functions()[0].graph().to_string();
    assert!(text.contains("all_reduce_mean"), "{text}");
    assert_eq!(eager_loss.to_vec::<f32>()?, graph_loss.to_vec::<f32>()?);
    assert_eq!(graph_loss.to_vec::<f32>()?, graph_loss2.to_vec::<f32>()?);
    assert_eq!(eager_w.grad().unwrap().to_vec::<f32>()?, graph_w.grad().unwrap().to_vec::<f32>()?);
    same_on_every_rank(&graph_w.grad().unwrap())?;

    // DataParallel: starts from rank 0's parameters, and its bucketed means are the bits of
    // one all_reduce(Mean) per gradient.
    let p1 = Tensor::from_vec(vec![1.0f32 + r, 2.0], &[2])?.requires_grad_(true)?;
    let p2 = Tensor::from_vec(vec![0.5f32; 3], &[3, 1])?.requires_grad_(true)?;
    let ddp = DataParallel::new(vec![p1.clone(), p2.clone()], 8)?; // 8 bytes: one bucket each
    assert_eq!(p1.to_vec::<f32>()?, vec![1.0, 2.0]);
    assert_eq!(ddp.buckets(), vec![vec![1], vec![0]]);
    let loss = || -> Result<Tensor> { data.matmul(&p2)?.tanh()?.sum()?.add(&p1.mul(&p1)?.sum()?.mul(r + 1.0)?) };
    loss()?.backward()?;
    let stats = ddp.finish()?;
    assert_eq!(stats.buckets, 2);
    assert!(stats.started_in_backward == 2, "{stats:?}");
    let (dp1, dp2) = (p1.grad().unwrap(), p2.grad().unwrap());
    drop(ddp);
    p1.zero_grad()?;
    p2.zero_grad()?;
    loss()?.backward()?;
    distributed::average_gradients(&[p1.clone(), p2.clone()])?;
    assert_eq!(dp1.to_vec::<f32>()?, p1.grad().unwrap().to_vec::<f32>()?);
    assert_eq!(dp2.to_vec::<f32>()?, p2.grad().unwrap().to_vec::<f32>()?);
    same_on_every_rank(&dp2)?;

    // The sampler gives disjoint equal shares.
    let s = ShardSampler::current();
    assert_eq!(s.indices(10).len(), 10 / n);
    assert_eq!(s.batch_range(4 * n)?, 4 * rank..4 * (rank + 1));

    // A rank that stops answering: the others get an Err naming the timeout, not a hang.
    if n > 1 {
        let late = distributed::init_with_timeout(Duration::from_millis(500));
        assert!(late.is_err(), "MPI initializes once per process");
        if rank == 0 {
            // Rank 1 joins this all-reduce only after 3 s; rank 0 waits 1 s.
            world.set_timeout(Duration::from_secs(1));
            let started = std::time::Instant::now();
            let e = distributed::all_reduce(&x, Reduce::Sum).unwrap_err();
            world.set_timeout(Duration::from_secs(20));
            assert!(format!("{e}").contains("no answer from the other ranks within 1.0 s"), "{e}");
            assert!(started.elapsed() < Duration::from_secs(3));
        } else {
            std::thread::sleep(Duration::from_secs(3));
            distributed::all_reduce(&x, Reduce::Sum)?; // completes rank 0's abandoned all-gather
        }
    }
    drop(world);
    Ok(())
}
