//! `einsum`, lowered to sums, permutes, reshapes and batched matrix products (so its
//! gradients and graph forms come from those).

use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;

/// An operand on the way: its value and the letter of each of its axes.
struct Term {
    t: Tensor,
    letters: Vec<char>,
}

fn bad(reason: impl Into<String>) -> Error {
    Error::invalid("einsum", "equation", reason)
}

/// The input letter lists and the output letters of `equation` (the output, when not
/// given, is every letter that appears once, in alphabetical order, as NumPy's).
fn parse(equation: &str, count: usize) -> Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let inputs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    if inputs.len() != count {
        return Err(bad(format!("'{equation}' names {} operands but {count} were given", inputs.len())));
    }
    if let Some(c) = eq.replacen("->", "", 1).chars().find(|&c| c != ',' && !c.is_ascii_alphabetic()) {
        return Err(bad(format!("'{equation}': '{c}' is not a letter (ellipses are not supported)")));
    }
    let output: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut once: Vec<char> = inputs.iter().flatten().copied().filter(|c| inputs.iter().flatten().filter(|d| *d == c).count() == 1).collect();
            once.sort_unstable();
            once
        }
    };
    for (i, l) in inputs.iter().chain(std::iter::once(&output)).enumerate() {
        if let Some(c) = l.iter().find(|c| l.iter().filter(|d| d == c).count() > 1) {
            return Err(bad(format!("'{equation}': '{c}' repeats in term {i} (diagonals are not supported)")));
        }
    }
    if let Some(c) = output.iter().find(|c| !inputs.iter().flatten().any(|d| d == *c)) {
        return Err(bad(format!("'{equation}': the output's '{c}' is in no input")));
    }
    Ok((inputs, output))
}

impl Term {
    fn dim(&self, c: char) -> usize {
        self.t.raw_shape()[self.letters.iter().position(|&d| d == c).expect("a letter of the term")]
    }

    /// Sums away the axes whose letters `keep` rejects.
    fn sum_out(self, keep: impl Fn(char) -> bool) -> Result<Term> {
        let axes: Vec<isize> = (0..self.letters.len()).filter(|&i| !keep(self.letters[i])).map(|i| i as isize).collect();
        if axes.is_empty() {
            return Ok(self);
        }
        Ok(Term { t: self.t.sum_axes(&axes, false)?, letters: self.letters.into_iter().filter(|&c| keep(c)).collect() })
    }

    /// The value with its axes in the order of `order` (a permutation of its letters),
    /// reshaped to the products of the groups `groups` (letter counts, in order).
    fn arranged(&self, order: &[char], groups: &[usize]) -> Result<Tensor> {
        let perm: Vec<isize> = order.iter().map(|c| self.letters.iter().position(|d| d == c).expect("a letter of the term") as isize).collect();
        let t = self.t.permute(&perm)?;
        let mut dims = Vec::new();
        let mut at = 0;
        for &n in groups {
            dims.push(order[at..at + n].iter().map(|&c| self.dim(c)).product::<usize>());
            at += n;
        }
        t.reshape(&dims)
    }
}

/// `a * b` contracted over their shared letters that `needed` rejects: one batched matrix
/// product `[batch, a only, shared] x [batch, shared, b only]`.
fn contract(a: Term, b: Term, needed: impl Fn(char) -> bool) -> Result<Term> {
    let (la, lb) = (a.letters.clone(), b.letters.clone());
    let a = a.sum_out(|c| needed(c) || lb.contains(&c))?;
    let b = b.sum_out(|c| needed(c) || la.contains(&c))?;
    for &c in a.letters.iter().filter(|c| b.letters.contains(c)) {
        if a.dim(c) != b.dim(c) {
            return Err(Error::invalid("einsum", "operands", format!("'{c}' is {} in one operand and {} in another", a.dim(c), b.dim(c))));
        }
    }
    let batch: Vec<char> = a.letters.iter().copied().filter(|c| b.letters.contains(c) && needed(*c)).collect();
    let shared: Vec<char> = a.letters.iter().copied().filter(|c| b.letters.contains(c) && !needed(*c)).collect();
    let a_only: Vec<char> = a.letters.iter().copied().filter(|c| !b.letters.contains(c)).collect();
    let b_only: Vec<char> = b.letters.iter().copied().filter(|c| !a.letters.contains(c)).collect();
    let order_a = [&batch[..], &a_only, &shared].concat();
    let order_b = [&batch[..], &shared, &b_only].concat();
    let ta = a.arranged(&order_a, &[batch.len(), a_only.len(), shared.len()])?;
    let tb = b.arranged(&order_b, &[batch.len(), shared.len(), b_only.len()])?;
    let letters = [&batch[..], &a_only, &b_only].concat();
    let dims: Vec<usize> = letters.iter().map(|&c| if a.letters.contains(&c) { a.dim(c) } else { b.dim(c) }).collect();
    Ok(Term { t: ta.matmul(&tb)?.reshape(&dims)?, letters })
}

impl Tensor {
    /// Einstein summation (NumPy's and PyTorch's `einsum`; ONNX `Einsum`): `equation` names
    /// each operand's axes with letters (`"ij,jk->ik"`), and the result's after `->` (without
    /// it: the letters that appear once, alphabetically). Letters missing from the result are
    /// summed over. Ellipses and repeated letters within one term (diagonals) are not
    /// supported. Operands are contracted pairwise, left to right, each pair as one batched
    /// matrix product.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let b = Tensor::from_vec(vec![5.0f32, 6.0, 7.0, 8.0], &[2, 2])?;
    /// assert_eq!(Tensor::einsum("ij,jk->ik", &[&a, &b])?.to_vec::<f32>()?, a.matmul(&b)?.to_vec::<f32>()?);
    /// assert_eq!(Tensor::einsum("ij->ji", &[&a])?.to_vec::<f32>()?, vec![1.0, 3.0, 2.0, 4.0]);
    /// assert_eq!(Tensor::einsum("ij,ij->", &[&a, &b])?.item::<f32>()?, 70.0);
    /// assert_eq!(Tensor::einsum("i,j", &[&a.narrow(0, 0, 1)?.reshape([2])?, &b.narrow(0, 0, 1)?.reshape([2])?])?.dims(), vec![2, 2]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let (inputs, output) = parse(equation, operands.len())?;
        let mut terms: Vec<Term> = Vec::with_capacity(operands.len());
        for (t, letters) in operands.iter().zip(inputs) {
            if t.rank() != letters.len() {
                return Err(Error::invalid(
                    "einsum",
                    "operands",
                    format!("'{equation}' gives {} axes to an operand of shape {}", letters.len(), t.raw_shape()),
                ));
            }
            if t.raw_shape().dims().contains(&UNKNOWN) {
                return Err(Error::invalid("einsum", "operands", "need known dims; give the arguments a fixed input_signature"));
            }
            terms.push(Term { t: (*t).clone(), letters });
        }
        let mut rest = terms.into_iter();
        let mut acc = rest.next().ok_or_else(|| Error::invalid("einsum", "operands", "needs at least one operand"))?;
        let later: Vec<Term> = rest.collect();
        for (i, b) in later.iter().enumerate() {
            let needed = |c: char| output.contains(&c) || later[i + 1..].iter().any(|t| t.letters.contains(&c));
            acc = contract(acc, Term { t: b.t.clone(), letters: b.letters.clone() }, needed)?;
        }
        let acc = acc.sum_out(|c| output.contains(&c))?;
        let perm: Vec<isize> = output.iter().map(|c| acc.letters.iter().position(|d| d == c).expect("an output letter") as isize).collect();
        if perm.iter().enumerate().all(|(i, &p)| i as isize == p) {
            Ok(acc.t)
        } else {
            acc.t.permute(&perm)
        }
    }
}
