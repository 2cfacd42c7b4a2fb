//! Random numbers inside graphs: a generator's state is a tensor, read by the draws and
//! written back after every call — so a traced function draws new numbers on each call, the
//! same bits as the eager code from the same state, without retracing.

use tensor_core::control::cond;
use tensor_core::function::lookup;
use tensor_core::prelude::*;
use tensor_core::random::{default_generator, manual_seed};
use tests::assert_bits_eq;

fn state(g: &Generator) -> Vec<i64> {
    g.state().to_vec::<i64>().unwrap()
}

/// Three draws: uniform like `x`, normal, a dropout mask.
fn noise_eager(x: &Tensor, g: &Generator) -> Result<Tensor> {
    let u = x.rand_like_gen(g)?;
    let z = Tensor::randn_gen(&[2, 3], DType::F32, g)?;
    x.dropout(0.5, g)?.add(&u)?.sum()?.add(&z.sum()?)
}

#[graph_fn]
fn noise(x: &Tensor, g: &Generator) -> Result<Tensor> {
    noise_eager(x, g)
}

#[test]
fn same_state_same_bits_eager_and_graph_and_new_numbers_on_every_call() -> Result<()> {
    let x = Tensor::randn(&[64], DType::F32, 1);
    let (eager_rng, graph_rng) = (Generator::new(123), Generator::new(123));
    let mut seen = Vec::new();
    for call in 1..=4 {
        let eager = noise_eager(&x, &eager_rng)?;
        let graph = noise(&x, &graph_rng)?;
        assert_bits_eq(&eager, &graph);
        // Three draws per call: the counter is written back after each call.
        assert_eq!(state(&graph_rng), vec![123, 3 * call]);
        assert_eq!(state(&eager_rng), state(&graph_rng));
        let v = graph.item::<f32>()?;
        assert!(!seen.contains(&v.to_bits()), "call {call} repeated an earlier call's numbers");
        seen.push(v.to_bits());
    }
    assert_eq!(lookup("noise").unwrap().trace_count(), 1, "new numbers without retracing");
    Ok(())
}

#[graph_fn]
fn with_default_generator(x: &Tensor) -> Result<Tensor> {
    x.dropout(0.5, &default_generator())
}

#[test]
fn the_default_generator_is_captured_state_and_manual_seed_restarts_it() -> Result<()> {
    let x = Tensor::ones(&[256], DType::F64);
    manual_seed(77)?;
    let first = with_default_generator(&x)?;
    let second = with_default_generator(&x)?;
    assert_ne!(first.to_vec::<f64>()?, second.to_vec::<f64>()?);
    assert_eq!(state(&default_generator()), vec![77, 2]);
    // Reseeding (a new seed is a tensor value, not a Rust value in the key): no retrace.
    manual_seed(77)?;
    assert_bits_eq(&with_default_generator(&x)?, &first);
    manual_seed(78)?;
    assert_ne!(with_default_generator(&x)?.to_vec::<f64>()?, first.to_vec::<f64>()?);
    assert_eq!(lookup("with_default_generator").unwrap().trace_count(), 1);
    // Eagerly, from the same state, the same mask.
    manual_seed(77)?;
    assert_bits_eq(&x.dropout(0.5, &default_generator())?, &first);
    Ok(())
}

#[test]
fn a_captured_generator_is_written_back_and_a_generator_made_in_the_body_is_a_constant() -> Result<()> {
    let captured = Generator::new(5);
    let x = Tensor::zeros(&[8], DType::F32);
    let f = tensor_core::function::ConcreteFunction::trace("draw", &[("x", &x)], || {
        let fresh = Generator::new(5);
        Ok(vec![x.rand_like_gen(&captured)?, x.rand_like_gen(&fresh)?])
    })?;
    assert_eq!(state(&captured), vec![5, 0], "tracing draws nothing for real");
    let a = f.call(&[&x])?;
    let b = f.call(&[&x])?;
    assert_eq!(state(&captured), vec![5, 2]);
    assert_ne!(a[0].to_vec::<f32>()?, b[0].to_vec::<f32>()?);
    // Made in the body, its state is data fixed at trace time: the same numbers every call,
    // which are the captured generator's first numbers (same key, counter 0).
    assert_bits_eq(&a[1], &b[1]);
    assert_bits_eq(&a[1], &a[0]);
    Ok(())
}

#[test]
fn element_values_do_not_depend_on_thread_splits_or_the_draw_shape() -> Result<()> {
    // A long draw goes parallel; its prefix is the short draw (element i depends only on the
    // key, the counter and i).
    let long = Tensor::rand_gen(&[300_000], DType::F32, &Generator::new(2))?.narrow(0, 0, 10)?;
    let short = Tensor::rand_gen(&[10], DType::F32, &Generator::new(2))?;
    assert_bits_eq(&long, &short);
    let matrix = Tensor::randn_gen(&[2, 5], DType::F64, &Generator::new(2))?;
    assert_bits_eq(&matrix.reshape([10])?, &Tensor::randn_gen(&[10], DType::F64, &Generator::new(2))?);
    Ok(())
}

#[test]
fn dropout_statistics_and_scaling() -> Result<()> {
    let g = Generator::new(3);
    let x = Tensor::ones(&[100_000], DType::F32);
    let y = x.dropout(0.1, &g)?.to_vec::<f32>()?;
    let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / y.len() as f64;
    assert!((kept - 0.9).abs() < 0.005, "{kept}");
    assert!(y.iter().all(|&v| v == 0.0 || v == (1.0f64 / 0.9) as f32));
    // p = 0 is the identity and draws nothing; p = 1 zeroes everything.
    let before = state(&g);
    assert_bits_eq(&x.dropout(0.0, &g)?, &x);
    assert_eq!(state(&g), before);
    assert_eq!(x.dropout(1.0, &g)?.sum()?.item::<f32>()?, 0.0);
    Ok(())
}

/// A draw inside a traced branch or loop body advances the generator only when the branch
/// runs, once per iteration: its state is carried through the node, as TF does with a
/// stateful generator, so the graph draws what the eager run draws.
#[test]
fn draws_inside_a_traced_branch_or_loop_advance_the_generator_as_eager_does() -> Result<()> {
    let body = |x: &Tensor, g: &Generator| -> Result<Vec<Tensor>> {
        let p = x.sum()?.gt(0.0)?;
        let y = cond(&p, || x.dropout(0.5, g), || Ok(x.clone()))?;
        let (_, z) = tensor_core::control::while_loop(
            |(i, _): &(Tensor, Tensor)| i.lt(&x.sum()?.cast(DType::I32)?),
            |(i, z)| Ok((&i + 1, z.add(&z.rand_like_gen(g)?)?)),
            (Tensor::scalar(0i32), y.clone()),
        )?;
        Ok(vec![y, z])
    };
    for sign in [1.0f32, -1.0] {
        let x = Tensor::ones(&[4], DType::F32).mul(sign)?;
        let (g_eager, g) = (Generator::new(1), Generator::new(1));
        let f = tensor_core::function::ConcreteFunction::trace("branch", &[("x", &x)], || body(&x, &g))?;
        assert_eq!(state(&g), vec![1, 0], "tracing draws nothing");
        for _ in 0..2 {
            let (eager, graph) = (body(&x, &g_eager)?, f.call(&[&x])?);
            assert_bits_eq(&graph[0], &eager[0]);
            assert_bits_eq(&graph[1], &eager[1]);
            assert_eq!(state(&g), state(&g_eager));
        }
        // Positive: one draw in the branch and four in the loop per call; negative: none.
        assert_eq!(state(&g), if sign > 0.0 { vec![1, 10] } else { vec![1, 0] });
    }
    Ok(())
}

#[test]
fn bad_arguments_are_errors_that_change_nothing() {
    let g = Generator::new(1);
    let x = Tensor::ones(&[4], DType::F32);
    for p in [-0.1, 1.5, f64::NAN] {
        let err = x.dropout(p, &g).unwrap_err().to_string();
        assert!(err.contains("probability"), "{err}");
    }
    assert!(Tensor::rand_gen(&[2], DType::I64, &g).is_err());
    assert!(Tensor::ones(&[2], DType::I32).dropout(0.5, &g).is_err());
    assert!(Generator::from_state(Tensor::zeros(&[3], DType::I64)).is_err());
    assert!(g.set_state(&Tensor::zeros(&[2], DType::I32)).is_err());
    assert_eq!(state(&g), vec![1, 0]);
}
