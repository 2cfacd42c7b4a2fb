//! Random generators whose state is a tensor, so randomness works inside graphs.
//!
//! A [`Generator`] holds an i64 tensor `[key, counter]`. Random ops
//! ([`Tensor::rand_gen`], [`Tensor::randn_gen`], [`Tensor::dropout`], ...) read it and are
//! pure functions of it (a counter-based generator, Philox 4x32-10: the numbers of element `i`
//! depend only on the key, the counter and `i`), then advance the counter in place. In a
//! `#[graph_fn]` the state is a captured or argument tensor like a parameter: the graph reads
//! it at every call and writes the advanced counter back, so every call draws new numbers,
//! and a graph and the eager code draw the same numbers from the same state, bit for bit.
//!
//! ```
//! use tensor_core::prelude::*;
//! let g = Generator::new(0);
//! #[graph_fn]
//! fn noisy(x: &Tensor, g: &Generator) -> Result<Tensor> {
//!     x.dropout(0.5, g)
//! }
//! let x = Tensor::ones(&[8], DType::F32);
//! let (a, b) = (noisy(&x, &g)?, noisy(&x, &g)?); // one trace, two masks
//! assert_ne!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
//! // The same state gives the same mask eagerly.
//! let e = Generator::new(0);
//! assert_eq!(x.dropout(0.5, &e)?.to_vec::<f32>()?, a.to_vec::<f32>()?);
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! A generator is also the one source of the initializers' draws (`nn::init`, the layers'
//! constructors): those are made on the host when a model is built, from the generator's
//! host stream (ChaCha12 keyed by the key, from the word the counter names), and move its
//! counter on, so one generator initializes a whole model reproducibly.
//!
//! A process-wide [`default_generator`] serves code that does not pass one; [`manual_seed`]
//! reseeds it. `Tensor::rand`/`randn` with a `u64` seed are the convenience for a fresh
//! generator's host stream: plain host-side draws (inside a trace, constants fixed at trace
//! time).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{seeded_rng, Tensor};
use rand_chacha::ChaCha12Rng;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The seed of the default generator until [`manual_seed`] (PyTorch's default seed).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

/// A counter-based random generator whose state is an i64 tensor `[key, counter]`: the one
/// source of randomness, PyTorch's `torch.Generator`. Random ops draw from it (in graphs too),
/// and so do the initializers: `Linear::new(4, 8, DType::F32, &g)`, `nn::init::normal(.., &g)`.
///
/// Cloning gives another handle to the same state (as cloning a tensor does). Pass it to
/// a `#[graph_fn]` as an argument, or capture it, or hold it in a `#[derive(GraphArg)]`
/// struct: its state is then a leaf the graph reads and writes back on every call.
///
/// ```
/// use tensor_core::prelude::*;
/// let g = Generator::new(3);
/// assert_eq!(g.state().to_vec::<i64>()?, vec![3, 0]);
/// Tensor::randn_gen(&[5], DType::F32, &g)?;
/// assert_eq!(g.state().to_vec::<i64>()?, vec![3, 1]); // one draw, one step of the counter
/// tensor_core::nn::Linear::new(2, 3, DType::F32, &g)?; // initial values: 9 f64 draws
/// assert_eq!(g.state().to_vec::<i64>()?, vec![3, 19]); // moved on by the 18 words they used
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Generator {
    state: Tensor,
    /// Serializes eager draws, so two threads never read the same counter.
    serial: Arc<Mutex<()>>,
}

impl Generator {
    /// A generator with key `seed` and counter 0.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let a = Tensor::rand_gen(&[2], DType::F64, &Generator::new(9))?;
    /// let b = Tensor::rand_gen(&[2], DType::F64, &Generator::new(9))?;
    /// assert_eq!(a.to_vec::<f64>()?, b.to_vec::<f64>()?);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(seed: u64) -> Generator {
        let state = Tensor::from_vec(vec![seed as i64, 0], &[2]).expect("two values for shape [2]");
        Generator { state, serial: Arc::new(Mutex::new(())) }
    }

    /// A generator whose state is `state` itself (i64 `[key, counter]`; the handle is shared,
    /// not copied): draws advance that very tensor. A tensor argument of a graph function
    /// can serve as a generator's state this way.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let state = Tensor::from_vec(vec![4i64, 0], &[2])?;
    /// let g = Generator::from_state(state.clone())?;
    /// Tensor::rand_gen(&[2], DType::F32, &g)?;
    /// assert_eq!(state.to_vec::<i64>()?, vec![4, 1]);
    /// assert!(Generator::from_state(Tensor::zeros(&[2], DType::F32)).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_state(state: Tensor) -> Result<Generator> {
        check_state("Generator::from_state", &state)?;
        Ok(Generator { state, serial: Arc::new(Mutex::new(())) })
    }

    /// The state tensor, i64 `[key, counter]` — a live handle: draws change it.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(1);
    /// let saved = g.state().to_vec::<i64>()?;
    /// let a = Tensor::rand_gen(&[3], DType::F32, &g)?;
    /// g.set_state(&Tensor::from_vec(saved, &[2])?)?;
    /// assert_eq!(Tensor::rand_gen(&[3], DType::F32, &g)?.to_vec::<f32>()?, a.to_vec::<f32>()?);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn state(&self) -> &Tensor {
        &self.state
    }

    /// Overwrites the state with `state` (i64 `[key, counter]`, e.g. saved from
    /// [`state`](Self::state)), in place.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(1);
    /// assert!(g.set_state(&Tensor::zeros(&[3], DType::I64)).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_state(&self, state: &Tensor) -> Result<()> {
        check_state("Generator::set_state", state)?;
        self.state.assign_(state)
    }

    /// Restarts the generator at key `seed`, counter 0, in place (every handle sees it).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(5);
    /// let a = Tensor::rand_gen(&[2], DType::F32, &g)?;
    /// g.manual_seed(5)?;
    /// assert_eq!(Tensor::rand_gen(&[2], DType::F32, &g)?.to_vec::<f32>()?, a.to_vec::<f32>()?);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn manual_seed(&self, seed: u64) -> Result<()> {
        self.set_state(&Tensor::from_vec(vec![seed as i64, 0], &[2])?)
    }

    /// Runs `draw` on this generator's host stream and moves the counter past what it used:
    /// the initializers' draws (`nn::init`, the layers' constructors), made on the host when
    /// a model is built. The stream is ChaCha12 keyed by the key (the stream of
    /// `Tensor::rand(.., seed)`), read from the word the counter names, so consecutive
    /// initializations from one generator continue one stream. Random ops
    /// ([`Tensor::rand_gen`], dropout) draw from Philox at the same counter. An `Err` while
    /// tracing a function the generator comes from outside of: its state exists only at run
    /// time (build layers outside traced code).
    pub(crate) fn host_draw<T>(&self, op: &'static str, draw: impl FnOnce(&mut ChaCha12Rng) -> T) -> Result<T> {
        let _serial = self.lock();
        let state = self.state.host_storage(op)?;
        let s: Vec<i64> = state.array::<i64>().expect("a generator's state is i64, checked when set").iter().copied().collect();
        let (key, counter) = (s[0], s[1]);
        let mut rng = seeded_rng(key as u64);
        rng.set_word_pos(counter as u64 as u128);
        let out = draw(&mut rng);
        let next = rng.get_word_pos() as u64 as i64;
        self.state.assign_(&Tensor::from_vec(vec![key, next], &[2])?)?;
        Ok(out)
    }

    /// Holds off other eager draws of this generator until dropped.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        // A panic while drawing leaves the state as valid as before: ignore the poison.
        self.serial.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Advances the counter by one draw, in place.
    pub(crate) fn advance(&self) -> Result<()> {
        let step = Tensor::from_vec(vec![0i64, 1], &[2])?;
        self.state.add_(&step)
    }
}

/// A generator state is an i64 tensor of shape `[2]`.
fn check_state(op: &'static str, state: &Tensor) -> Result<()> {
    if state.dtype() == DType::I64 && state.raw_dims() == [2] {
        Ok(())
    } else {
        Err(Error::invalid(op, "state", format!("must be an i64 [key, counter] of shape [2], found {} {}", state.dtype(), state.raw_shape())))
    }
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.state.to_vec::<i64>() {
            Ok(s) => write!(f, "Generator {{ key: {}, counter: {} }}", s[0], s[1]),
            Err(_) => write!(f, "Generator {{ traced state }}"),
        }
    }
}

static DEFAULT: OnceLock<Generator> = OnceLock::new();

/// The process-wide generator (seeded with [`DEFAULT_SEED`] until [`manual_seed`]): a handle
/// to the same state wherever it is asked for.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::random::{default_generator, manual_seed};
/// manual_seed(11)?;
/// let a = Tensor::rand_gen(&[2], DType::F32, &default_generator())?;
/// manual_seed(11)?;
/// let b = Tensor::rand_gen(&[2], DType::F32, &default_generator())?;
/// assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn default_generator() -> Generator {
    DEFAULT
        .get_or_init(|| {
            // Made on a fresh thread, where no trace is active: if the first use is inside a
            // trace, the state must still be a tensor from outside it (a slot written back),
            // not a constant of that trace.
            std::thread::scope(|s| s.spawn(|| Generator::new(DEFAULT_SEED)).join().expect("making a generator does not panic"))
        })
        .clone()
}

/// Reseeds the [`default_generator`]: key `seed`, counter 0.
///
/// ```
/// use tensor_core::prelude::*;
/// tensor_core::random::manual_seed(1)?;
/// assert_eq!(tensor_core::random::default_generator().state().to_vec::<i64>()?, vec![1, 0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn manual_seed(seed: u64) -> Result<()> {
    default_generator().manual_seed(seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn host_draws_continue_one_stream_the_seeded_one() {
        // `rand`'s StdRng from the seed: the stream seeded initializers have always drawn.
        let mut std = StdRng::seed_from_u64(7);
        let expected: Vec<f64> = (0..10).map(|_| std.random::<f64>()).collect();
        let g = Generator::new(7);
        let a = g.host_draw("test", |r| (0..4).map(|_| r.random::<f64>()).collect::<Vec<_>>()).unwrap();
        let b = g.host_draw("test", |r| (0..6).map(|_| r.random::<f64>()).collect::<Vec<_>>()).unwrap();
        assert_eq!([a, b].concat(), expected);
        assert_eq!(g.state().to_vec::<i64>().unwrap(), vec![7, 20]); // ten f64 draws, two words each
    }
}
