//! The staples a PyTorch port reaches for first: the losses with each reduction, `randperm`,
//! the shuffling `DataLoader` and `.i(...)` indexing. Values against hand-computed ones,
//! gradients against finite differences, eager == graph bit for bit, and errors.

use tensor_core::data::DataLoader;
use tensor_core::nn::{self, Reduction};
use tensor_core::prelude::*;
use tests::{assert_bits_eq, assert_close, assert_values};

const REDUCTIONS: [Reduction; 3] = [Reduction::Mean, Reduction::Sum, Reduction::None];

fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).expect("data matches shape")
}

/// The element losses reduced by hand: the none, sum and mean forms of `element`.
fn check_reductions(loss: impl Fn(Reduction) -> Result<Tensor>, element: &[f64], tol: f64) -> Result<()> {
    let sum: f64 = element.iter().sum();
    for (r, expected) in REDUCTIONS.iter().zip([vec![sum / element.len() as f64], vec![sum], element.to_vec()]) {
        let l = loss(*r)?;
        assert_eq!(l.dims(), if *r == Reduction::None { vec![2, 2] } else { vec![] }, "{r:?}");
        assert_close(&l, &expected, tol);
    }
    Ok(())
}

// ------------------------------------------------------------------------------- losses

#[test]
fn regression_losses_match_hand_computed_values_for_each_reduction() -> Result<()> {
    let x = f64s(&[0.5, -1.0, 2.0, 3.0], &[2, 2]);
    let y = f64s(&[1.0, -1.0, 0.0, 0.5], &[2, 2]); // differences -0.5, 0, 2, 2.5
    check_reductions(|r| nn::mse_loss(&x, &y, r), &[0.25, 0.0, 4.0, 6.25], 0.0)?;
    check_reductions(|r| nn::l1_loss(&x, &y, r), &[0.5, 0.0, 2.0, 2.5], 0.0)?;
    check_reductions(|r| nn::smooth_l1_loss(&x, &y, 1.0, r), &[0.125, 0.0, 1.5, 2.0], 0.0)?;
    // beta = 2: 2 sits on the boundary, where both branches give 1.
    check_reductions(|r| nn::smooth_l1_loss(&x, &y, 2.0, r), &[0.0625, 0.0, 1.0, 1.5], 0.0)?;
    check_reductions(|r| nn::smooth_l1_loss(&x, &y, 0.0, r), &[0.5, 0.0, 2.0, 2.5], 0.0)?;
    // f32 too.
    let (x32, y32) = (x.cast(DType::F32)?, y.cast(DType::F32)?);
    assert_values(&nn::mse_loss(&x32, &y32, Reduction::Sum)?, &[10.5]);
    Ok(())
}

#[test]
fn bce_with_logits_matches_the_formula_and_is_stable() -> Result<()> {
    let xs = [0.5, -1.0, 2.0, -3.0];
    let ys = [1.0, 0.0, 0.25, 0.5];
    // -y log sigmoid(x) - (1 - y) log(1 - sigmoid(x)), directly.
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let element: Vec<f64> = xs.iter().zip(&ys).map(|(&x, &y)| -y * sig(x).ln() - (1.0 - y) * (1.0 - sig(x)).ln()).collect();
    let (x, y) = (f64s(&xs, &[2, 2]), f64s(&ys, &[2, 2]));
    check_reductions(|r| nn::bce_with_logits(&x, &y, r), &element, 1e-14)?;
    // Large logits neither overflow nor lose the loss.
    let big = nn::bce_with_logits(&f64s(&[800.0, -800.0], &[2]), &f64s(&[0.0, 0.0], &[2]), Reduction::None)?;
    assert_values(&big, &[800.0, 0.0]);
    let big32 = nn::bce_with_logits(&Tensor::from_vec(vec![100.0f32], &[1])?, &Tensor::from_vec(vec![0.0f32], &[1])?, Reduction::Sum)?;
    assert_values(&big32, &[100.0]);
    Ok(())
}

#[test]
fn nll_loss_picks_the_labelled_log_probability() -> Result<()> {
    let logp = f64s(&[-0.1, -2.0, -3.0, -1.5, -0.5, -4.0], &[2, 3]);
    for labels in [Tensor::from_vec(vec![2i64, 0], &[2])?, Tensor::from_vec(vec![2i32, 0], &[2])?] {
        assert_values(&nn::nll_loss(&logp, &labels, Reduction::None)?, &[3.0, 1.5]);
        assert_values(&nn::nll_loss(&logp, &labels, Reduction::Sum)?, &[4.5]);
        assert_values(&nn::nll_loss(&logp, &labels, Reduction::Mean)?, &[2.25]);
    }
    // nll of log_softmax is the cross-entropy.
    let logits = Tensor::randn(&[4, 5], DType::F64, 2);
    let labels = Tensor::from_vec(vec![0i64, 4, 2, 2], &[4])?;
    let nll = nn::nll_loss(&logits.log_softmax(1)?, &labels, Reduction::Mean)?.item::<f64>()?;
    assert!((nll - nn::cross_entropy(&logits, &labels)?.item::<f64>()?).abs() < 1e-12);
    Ok(())
}

/// Central finite differences of scalar `f` at `x` (f64), one entry per element.
fn finite_diff(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Vec<f64>> {
    let base = x.to_vec::<f64>()?;
    let h = 1e-6;
    let at = |i: usize, d: f64| -> Result<f64> {
        let mut v = base.clone();
        v[i] += d;
        no_grad(|| f(&Tensor::from_vec(v, x.dims().as_slice())?))?.item::<f64>()
    };
    (0..base.len()).map(|i| Ok((at(i, h)? - at(i, -h)?) / (2.0 * h))).collect()
}

type Loss = fn(&Tensor, &Tensor, Reduction) -> Result<Tensor>;

fn smooth_half(x: &Tensor, y: &Tensor, r: Reduction) -> Result<Tensor> {
    nn::smooth_l1_loss(x, y, 0.5, r)
}

#[test]
fn loss_gradients_match_finite_differences() -> Result<()> {
    // Away from the kinks: no difference is 0 or +-0.5 (smooth L1's beta here).
    let x = f64s(&[0.3, -1.2, 2.0, 0.9, -0.4, 1.7], &[2, 3]);
    let y = f64s(&[0.1, 0.4, -0.5, 0.75, 0.2, 1.6], &[2, 3]);
    let losses: [Loss; 5] = [nn::mse_loss, nn::l1_loss, smooth_half, |x, y, r| nn::smooth_l1_loss(x, y, 1.0, r), nn::bce_with_logits];
    for loss in losses {
        for r in [Reduction::Mean, Reduction::Sum] {
            let (xg, yg) = (x.detach().requires_grad_(true)?, y.detach().requires_grad_(true)?);
            let g = tensor_core::grad(&[&loss(&xg, &yg, r)?], &[&xg, &yg], false)?;
            assert_close(&g[0], &finite_diff(&x, |x| loss(x, &y, r))?, 1e-7);
            assert_close(&g[1], &finite_diff(&y, |y| loss(&x, y, r))?, 1e-7);
        }
    }
    let labels = Tensor::from_vec(vec![1i64, 2], &[2])?;
    let xg = x.detach().requires_grad_(true)?;
    let g = tensor_core::grad(&[&nn::nll_loss(&xg, &labels, Reduction::Mean)?], &[&xg], false)?;
    assert_values(&g[0], &[0.0, -0.5, 0.0, 0.0, 0.0, -0.5]);
    assert_close(&g[0], &finite_diff(&x, |x| nn::nll_loss(x, &labels, Reduction::Mean))?, 1e-7);
    Ok(())
}

#[test]
fn bce_with_logits_has_pytorchs_gradient_at_zero() -> Result<()> {
    // sigmoid(x) - y, also at x = 0 where max(x, 0) and |x| have kinks.
    let x = Tensor::zeros(&[3], DType::F64).requires_grad_(true)?;
    let y = f64s(&[0.0, 1.0, 0.25], &[3]);
    nn::bce_with_logits(&x, &y, Reduction::Sum)?.backward()?;
    assert_values(&x.grad().expect("a grad"), &[0.5, -0.5, 0.25]);
    Ok(())
}

/// Every loss with its gradients, for eager == graph.
fn loss_program(x: &Tensor, y: &Tensor, labels: &Tensor, r: Reduction) -> Result<Vec<Tensor>> {
    let losses = vec![
        nn::mse_loss(x, y, r)?,
        nn::l1_loss(x, y, r)?,
        nn::smooth_l1_loss(x, y, 1.0, r)?,
        nn::bce_with_logits(x, &y.sigmoid()?, r)?,
        nn::nll_loss(&x.log_softmax(1)?, labels, r)?,
    ];
    let total = losses.iter().map(|l| l.sum()).collect::<Result<Vec<_>>>()?;
    let total = total.iter().skip(1).try_fold(total[0].clone(), |acc, l| acc.add(l))?;
    let mut out = tensor_core::grad(&[&total], &[x, y], false)?;
    out.extend(losses);
    Ok(out)
}

#[graph_fn]
fn staples_losses(x: &Tensor, y: &Tensor, labels: &Tensor, r: Reduction) -> Result<Vec<Tensor>> {
    loss_program(x, y, labels, r)
}

#[test]
fn losses_in_a_graph_match_eager_bit_for_bit() -> Result<()> {
    let x = Tensor::randn(&[4, 3], DType::F32, 11).requires_grad_(true)?;
    let y = Tensor::randn(&[4, 3], DType::F32, 12).requires_grad_(true)?;
    let labels = Tensor::from_vec(vec![0i64, 2, 1, 2], &[4])?;
    for r in REDUCTIONS {
        let (eager, graph) = (loss_program(&x, &y, &labels, r)?, staples_losses(&x, &y, &labels, r)?);
        assert_eq!(eager.len(), graph.len());
        for (e, g) in eager.iter().zip(&graph) {
            assert_bits_eq(e, g);
        }
    }
    // The reduction keys the trace by value: one trace each, none again.
    staples_losses(&x, &y, &labels, Reduction::Mean)?;
    assert_eq!(tensor_core::function::lookup("staples_losses").expect("registered").trace_count(), 3);
    Ok(())
}

#[test]
fn loss_arguments_that_do_not_fit_are_errors_naming_them() {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let says = |r: Result<Tensor>, words: &[&str]| {
        let e = r.unwrap_err().to_string();
        assert!(words.iter().all(|w| e.contains(w)), "{e}");
    };
    says(nn::mse_loss(&x, &Tensor::zeros(&[3], DType::F32), Reduction::Mean), &["mse_loss", "[2, 3]", "[3]", "`target`"]);
    says(nn::l1_loss(&x, &Tensor::zeros(&[2, 3], DType::F64), Reduction::Sum), &["l1_loss", "`target`", "f64", "f32", "cast"]);
    says(nn::bce_with_logits(&x.cast(DType::I64).unwrap(), &x, Reduction::Sum), &["bce_with_logits", "`input`"]);
    says(nn::smooth_l1_loss(&x, &x, -1.0, Reduction::Mean), &["smooth_l1_loss", "`beta`", "-1"]);
    let labels = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    says(nn::nll_loss(&x, &labels.cast(DType::F32).unwrap(), Reduction::Mean), &["nll_loss", "`target`", "i64 or i32"]);
    says(nn::nll_loss(&x, &Tensor::from_vec(vec![0i64, 1, 2], &[3]).unwrap(), Reduction::Mean), &["nll_loss", "one class index per row"]);
    says(nn::nll_loss(&Tensor::zeros(&[6], DType::F32), &labels, Reduction::Mean), &["nll_loss", "`input`", "[n, classes]"]);
}

// ------------------------------------------------------------------------------- randperm

fn sorted(mut v: Vec<i64>) -> Vec<i64> {
    v.sort();
    v
}

#[test]
fn randperm_is_a_reproducible_permutation() -> Result<()> {
    for n in [0, 1, 7, 100] {
        let p = Tensor::randperm(n, 5);
        assert_eq!((p.dtype(), p.dims().to_vec()), (DType::I64, vec![n]));
        assert_eq!(sorted(p.to_vec::<i64>()?), (0..n as i64).collect::<Vec<_>>());
        assert_eq!(p.to_vec::<i64>()?, Tensor::randperm(n, 5).to_vec::<i64>()?);
        let g = Tensor::randperm_gen(n, &Generator::new(5))?;
        assert_eq!(sorted(g.to_vec::<i64>()?), (0..n as i64).collect::<Vec<_>>());
    }
    assert_ne!(Tensor::randperm(100, 5).to_vec::<i64>()?, Tensor::randperm(100, 6).to_vec::<i64>()?);
    let g = Generator::new(9);
    let (a, b) = (Tensor::randperm_gen(50, &g)?.to_vec::<i64>()?, Tensor::randperm_gen(50, &g)?.to_vec::<i64>()?);
    assert_ne!(a, b);
    assert_eq!(a, Tensor::randperm_gen(50, &Generator::new(9))?.to_vec::<i64>()?);
    Ok(())
}

#[graph_fn]
fn staples_randperm(g: &Generator) -> Result<Tensor> {
    Tensor::randperm_gen(40, g)
}

#[test]
fn randperm_gen_in_a_graph_matches_eager_and_draws_anew_each_call() -> Result<()> {
    let (ge, gg) = (Generator::new(3), Generator::new(3));
    for _ in 0..3 {
        assert_bits_eq(&Tensor::randperm_gen(40, &ge)?, &staples_randperm(&gg)?);
        assert_bits_eq(ge.state(), gg.state());
    }
    assert_eq!(tensor_core::function::lookup("staples_randperm").expect("registered").trace_count(), 1);
    Ok(())
}

// ------------------------------------------------------------------------------- DataLoader

/// The samples (a value per sample) of each batch of one epoch, checking that the tensors'
/// rows stay together: x's row i is [i, 10 i] and y's entry is i.
fn epoch_samples(loader: &DataLoader) -> Result<Vec<Vec<i64>>> {
    let mut out = vec![];
    for batch in loader.epoch()? {
        let batch = batch?;
        let (x, y) = (batch[0].to_vec::<i64>()?, batch[1].to_vec::<i64>()?);
        assert_eq!(x.len(), 2 * y.len());
        for (k, &s) in y.iter().enumerate() {
            assert_eq!((x[2 * k], x[2 * k + 1]), (s, 10 * s));
        }
        out.push(y);
    }
    Ok(out)
}

fn dataset(n: i64) -> (Tensor, Tensor) {
    let x: Vec<i64> = (0..n).flat_map(|i| [i, 10 * i]).collect();
    (Tensor::from_vec(x, &[n as usize, 2]).unwrap(), Tensor::arange(0i64, n))
}

#[test]
fn the_loader_covers_every_sample_once_per_epoch() -> Result<()> {
    let (x, y) = dataset(10);
    let in_order = DataLoader::new(&[&x, &y], 4)?;
    assert_eq!(epoch_samples(&in_order)?, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    assert_eq!((in_order.len(), in_order.samples(), in_order.epoch()?.len()), (3, 10, 3));
    let shuffled = DataLoader::new(&[&x, &y], 4)?.shuffle(1);
    let mut epochs = vec![];
    for _ in 0..3 {
        let batches = epoch_samples(&shuffled)?;
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 4, 2]);
        let all = sorted(batches.concat());
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        epochs.push(batches.concat());
    }
    assert!(epochs[0] != epochs[1] && epochs[1] != epochs[2], "a new order each epoch: {epochs:?}");
    // drop_last: two full batches, eight distinct samples.
    let dropping = DataLoader::new(&[&x, &y], 4)?.shuffle(1).drop_last(true);
    assert_eq!(dropping.len(), 2);
    for _ in 0..3 {
        let batches = epoch_samples(&dropping)?;
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 4]);
        let all = sorted(batches.concat());
        assert!(all.windows(2).all(|w| w[0] < w[1]) && all.len() == 8);
    }
    assert_eq!(epoch_samples(&DataLoader::new(&[&x, &y], 5)?.drop_last(true))?.len(), 2);
    assert!(DataLoader::new(&[&x, &y], 11)?.drop_last(true).is_empty());
    Ok(())
}

#[test]
fn a_seed_or_a_generator_reproduces_the_epochs() -> Result<()> {
    let (x, y) = dataset(9);
    let run = |loader: DataLoader| -> Result<Vec<Vec<Vec<i64>>>> { (0..3).map(|_| epoch_samples(&loader)).collect() };
    let a = run(DataLoader::new(&[&x, &y], 3)?.shuffle(42))?;
    assert_eq!(a, run(DataLoader::new(&[&x, &y], 3)?.shuffle(42))?);
    assert_ne!(a, run(DataLoader::new(&[&x, &y], 3)?.shuffle(43))?);
    assert_eq!(a, run(DataLoader::new(&[&x, &y], 3)?.shuffle_gen(&Generator::new(42)))?);
    Ok(())
}

#[test]
fn loader_arguments_that_do_not_fit_are_errors() {
    let (x, y) = dataset(4);
    let says = |r: Result<DataLoader>, words: &[&str]| {
        let e = r.unwrap_err().to_string();
        assert!(words.iter().all(|w| e.contains(w)), "{e}");
    };
    says(DataLoader::new(&[&x, &y], 0), &["batch_size", "at least 1"]);
    says(DataLoader::new(&[], 2), &["tensors", "no tensors"]);
    says(DataLoader::new(&[&Tensor::scalar(1.0f32)], 2), &["tensors[0]", "scalar"]);
    says(DataLoader::new(&[&x, &Tensor::arange(0i64, 3)], 2), &["tensors[1]", "[3]", "4 samples"]);
}

// ------------------------------------------------------------------------------- .i(...)

#[test]
fn i_matches_narrow_and_select() -> Result<()> {
    let x = Tensor::arange(0.0f32, 60.0).reshape([3, 4, 5])?;
    let same = |a: Tensor, b: Tensor| assert_bits_eq(&a, &b);
    same(x.i(1)?, x.select(0, 1)?);
    same(x.i(-1)?, x.select(0, 2)?);
    same(x.i((0, .., 2..4))?, x.select(0, 0)?.narrow(1, 2, 2)?);
    same(x.i((.., 1..))?, x.narrow(1, 1, 3)?);
    same(x.i((..2, ..=1, -1))?, x.narrow(0, 0, 2)?.narrow(1, 0, 2)?.select(2, 4)?);
    same(x.i((1..=2, 3, -3..-1))?, x.narrow(0, 1, 2)?.select(1, 3)?.narrow(1, 2, 2)?);
    same(x.i((.., .., ..))?, x.clone());
    same(x.i((2usize, 3i64, 4isize))?, x.select(0, 2)?.select(0, 3)?.select(0, 4)?);
    assert_eq!(x.i((0, 0, 0))?.dims(), Vec::<usize>::new());
    assert_eq!(x.i((.., 2..2))?.dims(), vec![3, 0, 5]);
    Ok(())
}

fn index_program(x: &Tensor) -> Result<Vec<Tensor>> {
    let y = x.i((1, 1..3, 2..4))?.mul(&x.i((-1, 1..3, ..=1))?)?;
    let g = tensor_core::grad(&[&y.tanh()?.sum()?], &[x], false)?;
    Ok(vec![y, g[0].clone()])
}

#[graph_fn]
fn staples_index(x: &Tensor) -> Result<Vec<Tensor>> {
    index_program(x)
}

#[test]
fn i_differentiates_and_traces() -> Result<()> {
    let x = Tensor::arange(0.0f64, 24.0).reshape([2, 3, 4])?.requires_grad_(true)?;
    x.i((1, 2, 1..3))?.sum()?.backward()?;
    let mut expected = vec![0.0; 24];
    expected[21] = 1.0;
    expected[22] = 1.0;
    assert_values(&x.grad().expect("a grad"), &expected);
    let x = Tensor::randn(&[2, 4, 4], DType::F32, 8).requires_grad_(true)?;
    for (e, g) in index_program(&x)?.iter().zip(&staples_index(&x)?) {
        assert_bits_eq(e, g);
    }
    Ok(())
}

#[test]
fn bad_indices_are_errors_naming_the_axis_and_the_fix() {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let says = |r: Result<Tensor>, words: &[&str]| {
        let e = r.unwrap_err().to_string();
        assert!(words.iter().all(|w| e.contains(w)), "{e}");
    };
    says(x.i((0, 3)), &["`index`", "3 is out of range for axis 1 of length 3", "-3..3"]);
    says(x.i(-3), &["-3 is out of range for axis 0 of length 2", "-2..2"]);
    says(x.i((0, 0, 0)), &["3 entries", "rank 2", "at most 2"]);
    says(x.i((.., 1..5)), &["1..5", "axis 1 of length 3", "<= 3"]);
    let (start, end) = (2, 1);
    says(x.i((start..end, ..)), &["2..1", "axis 0"]);
}

// ---------------------------------------------------------------------------- sin and cos

fn trig(x: &Tensor) -> Result<Vec<Tensor>> {
    let y = x.sin()?.mul(&x.cos()?)?.add(&x.mul(3.0)?.cos()?)?;
    let g = tensor_core::grad(&[&y.sum()?], &[x], false)?;
    Ok(vec![y, g[0].clone()])
}

#[graph_fn]
fn staples_trig(x: &Tensor) -> Result<Vec<Tensor>> {
    trig(x)
}

#[test]
fn sin_and_cos_match_values_gradients_and_eager() -> Result<()> {
    let half_pi = std::f64::consts::FRAC_PI_2;
    let x = f64s(&[0.0, half_pi, std::f64::consts::PI, -half_pi / 3.0], &[4]);
    assert_close(&x.sin()?, &[0.0, 1.0, 0.0, -0.5], 1e-15);
    assert_close(&x.cos()?, &[1.0, 0.0, -1.0, 3f64.sqrt() / 2.0], 1e-15);
    assert_close(&x.cast(DType::F32)?.sin()?.cast(DType::F64)?, &[0.0, 1.0, 0.0, -0.5], 1e-7);
    assert!(Tensor::scalar(1i32).sin().is_err(), "sin needs a float dtype");
    // d/dx sin = cos, d/dx cos = -sin: against finite differences, through a product.
    let xs = f64s(&[0.3, -1.2, 2.0, 0.9], &[4]);
    let xg = xs.detach().requires_grad_(true)?;
    let g = &trig(&xg)?[1];
    assert_close(g, &finite_diff(&xs, |x| x.sin()?.mul(&x.cos()?)?.add(&x.mul(3.0)?.cos()?)?.sum())?, 1e-7);
    // A graph gives eager's bits, forward and gradient.
    let x32 = Tensor::randn(&[64], DType::F32, 3).requires_grad_(true)?;
    for (e, g) in trig(&x32)?.iter().zip(&staples_trig(&x32)?) {
        assert_bits_eq(e, g);
    }
    Ok(())
}
