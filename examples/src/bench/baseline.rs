//! The hand-written ndarray baselines: the same computations written directly with ndarray
//! (W3 with its backward pass derived by hand), the bar graph mode should meet.

use ndarray::{Array1, Array2, Axis, Zip};

/// W1 in place: 100 times `x = x * 1.0001 + 0.0001`.
pub fn w1(x: &mut Array1<f32>) {
    for _ in 0..100 {
        x.mapv_inplace(|v| v * 1.0001 + 0.0001);
    }
}

/// W2 in one pass with the standard library's `tanh` and `exp` (parallel over rayon).
pub fn w2(x: &Array1<f32>) -> Array1<f32> {
    Zip::from(x).par_map_collect(|&v| (v * 1.5 + 0.5).tanh() * (1.0 / (1.0 + (-v).exp())) - v * 0.5)
}

/// W5: matrixmultiply through `dot`.
pub fn w5(a: &Array2<f32>, b: &Array2<f32>) -> Array2<f32> {
    a.dot(b)
}

/// W3: the MLP's forward pass, softmax cross-entropy, hand-derived backward and SGD.
pub struct Mlp {
    pub w: [Array2<f32>; 3],
    pub b: [Array1<f32>; 3],
}

impl Mlp {
    /// The same initial values as the tensor-core model.
    pub fn from_params(params: &[tensor_core::Tensor]) -> Mlp {
        let m = |i: usize| params[i].to_array::<f32>().expect("f32").into_dimensionality().expect("2-d");
        let v = |i: usize| params[i].to_array::<f32>().expect("f32").into_dimensionality().expect("1-d");
        Mlp { w: [m(0), m(2), m(4)], b: [v(1), v(3), v(5)] }
    }

    /// One training step; returns the loss.
    pub fn train_step(&mut self, x: &Array2<f32>, labels: &[usize], lr: f32) -> f32 {
        let n = x.nrows() as f32;
        let h1 = (x.dot(&self.w[0]) + &self.b[0]).mapv(|v| v.max(0.0));
        let h2 = (h1.dot(&self.w[1]) + &self.b[1]).mapv(|v| v.max(0.0));
        let logits = h2.dot(&self.w[2]) + &self.b[2];
        let (loss, mut d) = softmax_xent(&logits, labels);
        d.mapv_inplace(|v| v / n);
        let grads3 = (h2.t().dot(&d), d.sum_axis(Axis(0)));
        let mut d2 = d.dot(&self.w[2].t());
        Zip::from(&mut d2).and(&h2).for_each(|g, &h| *g = if h > 0.0 { *g } else { 0.0 });
        let grads2 = (h1.t().dot(&d2), d2.sum_axis(Axis(0)));
        let mut d1 = d2.dot(&self.w[1].t());
        Zip::from(&mut d1).and(&h1).for_each(|g, &h| *g = if h > 0.0 { *g } else { 0.0 });
        let grads1 = (x.t().dot(&d1), d1.sum_axis(Axis(0)));
        for (i, (gw, gb)) in [grads1, grads2, grads3].into_iter().enumerate() {
            self.w[i].scaled_add(-lr, &gw);
            self.b[i].scaled_add(-lr, &gb);
        }
        loss
    }
}

/// Mean cross-entropy of softmax(logits) and the gradient `softmax - onehot` (unscaled).
fn softmax_xent(logits: &Array2<f32>, labels: &[usize]) -> (f32, Array2<f32>) {
    let mut p = logits.clone();
    let mut loss = 0.0;
    for (mut row, &l) in p.axis_iter_mut(Axis(0)).zip(labels) {
        let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        row.mapv_inplace(|v| (v - max).exp());
        let sum = row.sum();
        row.mapv_inplace(|v| v / sum);
        loss -= row[l].ln();
        row[l] -= 1.0;
    }
    (loss / labels.len() as f32, p)
}
