//! The op families and how a step picks one. Each family builds one step (and the helper
//! steps or inputs it needs) from values that fit, and returns `None` when the program has
//! none it can use: `elementwise.rs`, `shapes.rs`, `nn.rs`, and `control.rs` for `cond` and
//! `while_loop`.

use super::Gen;

/// The families and their weights.
const FAMILIES: [(Family, u32); 17] = [
    (Family::Unary, 10),
    (Family::Binary, 14),
    (Family::ScalarLhs, 3),
    (Family::Compare, 4),
    (Family::Where, 5),
    (Family::Clamp, 3),
    (Family::Cast, 4),
    (Family::Reduce, 8),
    (Family::Matmul, 9),
    (Family::Layout, 12),
    (Family::Index, 5),
    (Family::Softmax, 5),
    (Family::Conv, 4),
    (Family::Pool, 3),
    (Family::InPlace, 6),
    (Family::Cond, 4),
    (Family::While, 4),
];

#[derive(Clone, Copy, Debug)]
enum Family {
    Unary,
    Binary,
    ScalarLhs,
    Compare,
    Where,
    Clamp,
    Cast,
    Reduce,
    Matmul,
    Layout,
    Index,
    Softmax,
    Conv,
    Pool,
    InPlace,
    Cond,
    While,
}

impl Gen {
    /// One step of a family drawn by weight (retrying another family when one cannot).
    pub(super) fn any_step(&mut self) {
        let weights: Vec<u32> = FAMILIES.iter().map(|f| f.1).collect();
        for _ in 0..8 {
            let family = FAMILIES[self.rng.weighted(&weights)].0;
            let mark = self.checkpoint();
            if self.family(family).is_some() && self.within_limits(&mark) {
                return;
            }
            self.rollback(mark);
        }
        let x = self.operand();
        self.unary_on(x);
    }

    fn family(&mut self, f: Family) -> Option<()> {
        match f {
            Family::Unary => {
                let x = self.pick(|i| i.ty.numel() > 0).unwrap_or_else(|| self.operand());
                self.unary_on(x);
            }
            Family::Binary => {
                let x = self.operand();
                self.binary_on(x);
            }
            Family::ScalarLhs => self.scalar_lhs()?,
            Family::Compare => {
                let x = self.operand();
                self.compare_on(x);
            }
            Family::Where => {
                let x = self.operand();
                self.where_on(x)?;
            }
            Family::Clamp => self.clamp()?,
            Family::Cast => self.cast()?,
            Family::Reduce => self.reduce()?,
            Family::Matmul => self.matmul()?,
            Family::Layout => self.layout()?,
            Family::Index => self.index()?,
            Family::Softmax => self.softmax()?,
            Family::Conv => self.conv()?,
            Family::Pool => self.pool()?,
            Family::InPlace => self.in_place()?,
            Family::Cond => self.cond()?,
            Family::While => self.while_loop()?,
        }
        Some(())
    }
}

/// The NumPy broadcast of two shapes.
pub(super) fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let get = |s: &[usize], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// `axis` of a rank-`rank` value as an index.
pub(super) fn norm(axis: isize, rank: usize) -> usize {
    if axis < 0 {
        (axis + rank as isize) as usize
    } else {
        axis as usize
    }
}

/// `dims` reduced over `axes`.
pub(super) fn reduced(dims: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    (0..dims.len()).filter_map(|d| if axes.contains(&d) { keep.then_some(1) } else { Some(dims[d]) }).collect()
}

/// A scalar operand's value.
pub(super) fn as_f64(s: crate::fuzz::program::Scalar) -> f64 {
    match s {
        crate::fuzz::program::Scalar::F(v) => v,
        crate::fuzz::program::Scalar::I(v) => v as f64,
    }
}
