//! Property tests of NumPy broadcasting: random broadcast-compatible shapes (rank 0..4, dims
//! 1..4, some set to 1) and random values; add, mul, maximum and where_ must agree with a
//! plain reference that walks the broadcast shape with index arithmetic. Incompatible
//! shapes must give `Error::Broadcast` naming both shapes.

use proptest::prelude::*;
use tensor_core::prelude::*;

/// The broadcast of two shapes by NumPy's rule, written out independently of the library.
fn reference_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// The flat index into a tensor of shape `s` read at multi-index `idx` of the broadcast
/// shape (`s` aligned to the right; its size-1 dims repeat).
fn source_index(s: &[usize], idx: &[usize]) -> usize {
    let lead = idx.len() - s.len();
    s.iter().enumerate().fold(0, |flat, (d, &n)| flat * n + if n == 1 { 0 } else { idx[lead + d] })
}

/// Every multi-index of `shape` in row-major order.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = flat % shape[d];
                flat /= shape[d];
            }
            idx
        })
        .collect()
}

/// `f` applied over the broadcast of `inputs` (values row-major with their shapes).
fn reference<const N: usize>(inputs: [(&[f64], &[usize]); N], out: &[usize], f: impl Fn([f64; N]) -> f64) -> Vec<f64> {
    indices(out).iter().map(|idx| f(inputs.map(|(v, s)| v[source_index(s, idx)]))).collect()
}

/// A shape of rank `rank` taken from the right of `base`, with the dims where `ones` is set
/// replaced by 1.
fn derive(base: &[usize], rank: usize, ones: &[bool]) -> Vec<usize> {
    base[base.len() - rank..].iter().zip(&ones[base.len() - rank..]).map(|(&d, &one)| if one { 1 } else { d }).collect()
}

/// Up to three shapes that broadcast together, their broadcast shape, and values for each.
#[derive(Debug, Clone)]
struct Case {
    shapes: Vec<Vec<usize>>,
    values: Vec<Vec<f64>>,
}

fn case(operands: usize) -> impl Strategy<Value = Case> {
    (prop::collection::vec(1usize..=4, 4), prop::collection::vec((0usize..=4, prop::collection::vec(any::<bool>(), 4)), operands))
        .prop_flat_map(|(base, specs)| {
            let shapes: Vec<Vec<usize>> = specs.iter().map(|(rank, ones)| derive(&base, *rank, ones)).collect();
            let values = shapes.iter().map(|s| prop::collection::vec(-20i32..=20, s.iter().product::<usize>())).collect::<Vec<_>>();
            (Just(shapes), values)
        })
        .prop_map(|(shapes, values)| Case { shapes, values: values.into_iter().map(|v| v.into_iter().map(f64::from).collect()).collect() })
}

fn make(values: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape).unwrap().cast(dtype).unwrap()
}

/// An op's name, its result, and the scalar function it should have applied.
type NamedResult = (&'static str, Tensor, fn(f64, f64) -> f64);

fn check_binary(c: &Case, dtype: DType) -> std::result::Result<(), TestCaseError> {
    let (sa, sb) = (&c.shapes[0], &c.shapes[1]);
    let (va, vb) = (&c.values[0], &c.values[1]);
    let out = reference_shape(sa, sb).expect("generated shapes broadcast");
    let (a, b) = (make(va, sa, dtype), make(vb, sb, dtype));
    let ops: [NamedResult; 5] = [
        ("add", a.add(&b).unwrap(), |x, y| x + y),
        ("mul", a.mul(&b).unwrap(), |x, y| x * y),
        ("sub", (&b - &a), |x, y| y - x),
        ("maximum", a.maximum(&b).unwrap(), f64::max),
        ("minimum", b.minimum(&a).unwrap(), f64::min),
    ];
    for (name, got, f) in ops {
        prop_assert_eq!(got.dtype(), dtype);
        prop_assert_eq!(got.dims(), out.clone(), "{} of {:?} and {:?}", name, sa, sb);
        let want = reference([(va, sa), (vb, sb)], &out, |[x, y]| f(x, y));
        prop_assert_eq!(tests::as_f64(&got), want, "{} of {:?} and {:?}", name, sa, sb);
    }
    // Comparisons broadcast the same way.
    let lt = a.lt(&b)?;
    prop_assert_eq!(lt.dims(), out.clone());
    let want = reference([(va, sa), (vb, sb)], &out, |[x, y]| f64::from(u8::from(x < y)));
    prop_assert_eq!(tests::as_f64(&lt), want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tests::proptest_cases(200)))]

    #[test]
    fn binary_ops_match_reference_f64(c in case(2)) {
        check_binary(&c, DType::F64)?;
    }

    #[test]
    fn binary_ops_match_reference_i32(c in case(2)) {
        check_binary(&c, DType::I32)?;
    }

    #[test]
    fn binary_ops_match_reference_f32(c in case(2)) {
        check_binary(&c, DType::F32)?;
    }

    #[test]
    fn where_matches_reference(c in case(3), dtype in prop::sample::select(vec![DType::F32, DType::F64, DType::I32, DType::I64])) {
        let (sc, sa, sb) = (&c.shapes[0], &c.shapes[1], &c.shapes[2]);
        let out = reference_shape(sc, &reference_shape(sa, sb).unwrap()).unwrap();
        let cond = make(&c.values[0], sc, DType::F64).gt(0.0)?;
        let (a, b) = (make(&c.values[1], sa, dtype), make(&c.values[2], sb, dtype));
        let got = Tensor::where_(&cond, &a, &b).unwrap();
        prop_assert_eq!(got.dims(), out.clone(), "where of {:?}, {:?}, {:?}", sc, sa, sb);
        prop_assert_eq!(got.dtype(), dtype);
        let want = reference([(&c.values[0], sc), (&c.values[1], sa), (&c.values[2], sb)], &out, |[k, x, y]| if k > 0.0 { x } else { y });
        prop_assert_eq!(tests::as_f64(&got), want);
    }

    #[test]
    fn broadcast_to_matches_reference(c in case(1), extra in prop::collection::vec(1usize..=3, 0..=2)) {
        // The target: leading dims added, and the size-1 dims expanded to their base size.
        let s = &c.shapes[0];
        let target: Vec<usize> = extra.iter().copied().chain(s.iter().map(|&d| if d == 1 { 3 } else { d })).collect();
        let got = make(&c.values[0], s, DType::F64).broadcast_to(&target).unwrap();
        prop_assert_eq!(got.dims(), target.clone());
        prop_assert_eq!(tests::as_f64(&got), reference([(&c.values[0], s)], &target, |[x]| x));
    }

    #[test]
    fn incompatible_shapes_give_broadcast_errors(
        base in prop::collection::vec(1usize..=4, 1..=4),
        ra in 0usize..=3,
        rb in 0usize..=3,
        pos in 0usize..4,
        (da, db) in (2usize..=5, 2usize..=5).prop_filter("distinct", |(x, y)| x != y),
    ) {
        // Two shapes that share the trailing dims of `base`, except one aligned position
        // where they hold different dims, neither 1.
        let rank = base.len();
        let (ra, rb) = (ra.min(rank).max(1), rb.min(rank).max(1));
        let common = ra.min(rb);
        let k = rank - 1 - pos % common; // a position both shapes have
        let mut a = base[rank - ra..].to_vec();
        let mut b = base[rank - rb..].to_vec();
        a[k - (rank - ra)] = da;
        b[k - (rank - rb)] = db;
        prop_assert!(reference_shape(&a, &b).is_none());
        let (x, y) = (Tensor::zeros(&a, DType::F32), Tensor::ones(&b, DType::F32));
        let expect = |r: Result<Tensor>, op: &str| -> std::result::Result<(), TestCaseError> {
            match r {
                Err(Error::Broadcast { op: o, lhs, rhs }) => {
                    prop_assert_eq!(o, op);
                    prop_assert_eq!(lhs.dims(), &a[..]);
                    prop_assert_eq!(rhs.dims(), &b[..]);
                    Ok(())
                }
                other => Err(TestCaseError::fail(format!("{op}: expected Error::Broadcast, got {other:?}"))),
            }
        };
        expect(x.add(&y), "add")?;
        expect(x.mul(&y), "mul")?;
        expect(x.maximum(&y), "maximum")?;
        expect(x.compare(tensor_core::ops::CmpOp::Lt, &y), "lt")?;
        let cond = Tensor::ones(&[1], DType::Bool);
        expect(Tensor::where_(&cond, &x, &y), "where_")?;
        // Nothing changed.
        prop_assert_eq!(tests::as_f64(&x), vec![0.0; a.iter().product()]);
        // An in-place op whose result would not fit is an error too, and leaves x as it was.
        prop_assert!(x.add_(&y).is_err());
        prop_assert_eq!(x.version(), 0);
    }
}

#[test]
fn reference_shape_follows_numpy() {
    assert_eq!(reference_shape(&[2, 1, 3], &[4, 1]), Some(vec![2, 4, 3]));
    assert_eq!(reference_shape(&[], &[2, 2]), Some(vec![2, 2]));
    assert_eq!(reference_shape(&[3], &[4]), None);
    assert_eq!(source_index(&[2, 1], &[1, 1, 3]), 1);
    assert_eq!(source_index(&[2, 3], &[1, 2]), 5);
    assert_eq!(source_index(&[3], &[1, 2]), 2);
}
