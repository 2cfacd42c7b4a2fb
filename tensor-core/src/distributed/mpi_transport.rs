//! The MPI transport: one thread owns MPI (it initializes it, makes every call and finalizes
//! it), and the rest of the program hands it jobs. That gives three things at once: calls
//! from any thread are serialized without asking MPI for `MPI_THREAD_MULTIPLE`; a bucket's
//! all-reduce runs while the main thread goes on with backward (overlap); and a caller waits
//! for its answer with a timeout, so a rank that stops answering makes the others fail with
//! an `Err` instead of hanging forever.

use crate::error::{Error, Result};
use crate::ops::{Job, Pending, Transport};
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The job's kind and its buffer, sent to the MPI thread.
pub(super) enum Call {
    AllGather(Vec<u8>),
    Broadcast(Vec<u8>, usize),
    Shutdown,
}

/// MPI's world communicator, driven from its own thread.
pub(super) struct MpiTransport {
    rank: usize,
    size: usize,
    timeout_ms: AtomicU64,
    jobs: Mutex<Sender<(Call, Job)>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl MpiTransport {
    /// Starts the MPI thread and initializes MPI on it.
    pub(super) fn start(timeout: Duration) -> Result<MpiTransport> {
        let (jobs, inbox) = channel::<(Call, Job)>();
        let (ready, started) = channel::<Result<(usize, usize)>>();
        let thread = std::thread::Builder::new()
            .name("mpi".into())
            .spawn(move || {
                let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
                    let _ = ready.send(Err(failed("init", "MPI is already initialized in this process")));
                    return;
                };
                let world = universe.world();
                let _ = ready.send(Ok((world.rank() as usize, world.size() as usize)));
                for (call, job) in inbox {
                    let start = Instant::now();
                    let result = match call {
                        Call::Shutdown => break,
                        Call::AllGather(bytes) => catch_unwind(AssertUnwindSafe(|| {
                            let mut out = vec![0u8; bytes.len() * world.size() as usize];
                            world.all_gather_into(&bytes[..], &mut out[..]);
                            out
                        })),
                        Call::Broadcast(mut bytes, root) => catch_unwind(AssertUnwindSafe(|| {
                            world.process_at_rank(root as i32).broadcast_into(&mut bytes[..]);
                            bytes
                        })),
                    };
                    let result = result.map_err(|_| failed("collective", "MPI reported an error (see the message above)"));
                    job.finish(result, start.elapsed());
                }
                drop(universe); // MPI_Finalize
            })
            .map_err(|e| failed("init", &format!("cannot start the MPI thread: {e}")))?;
        let (rank, size) = started.recv().map_err(|_| failed("init", "MPI failed to initialize"))??;
        Ok(MpiTransport {
            rank,
            size,
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
            jobs: Mutex::new(jobs),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets how long a caller waits for a collective's answer.
    pub(super) fn set_timeout(&self, timeout: Duration) {
        self.timeout_ms.store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    /// Hands `call` to the MPI thread.
    fn submit(&self, op: &'static str, call: Call) -> Pending {
        let (job, pending) = Job::new(op, self.timeout());
        let sent = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).send((call, job));
        match sent {
            Ok(()) => pending,
            Err(_) => Pending::failed(failed(op, "the MPI thread has stopped (MPI was finalized or failed)")),
        }
    }

    /// Finalizes MPI after the jobs already handed over; waits at most the timeout.
    pub(super) fn shutdown(&self) {
        let (job, pending) = Job::new("finalize", self.timeout());
        let _ = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).send((Call::Shutdown, job));
        drop(pending);
        if let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let deadline = Instant::now() + self.timeout();
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        self.start_all_gather(bytes.to_vec()).wait().map(|(b, _)| b)
    }

    fn broadcast(&self, bytes: &mut [u8], root: usize) -> Result<()> {
        let (out, _) = self.submit("broadcast", Call::Broadcast(bytes.to_vec(), root)).wait()?;
        bytes.copy_from_slice(&out);
        Ok(())
    }

    fn start_all_gather(&self, bytes: Vec<u8>) -> Pending {
        self.submit("all_gather", Call::AllGather(bytes))
    }
}

fn failed(op: &'static str, reason: &str) -> Error {
    Error::Distributed { op, reason: reason.to_string() }
}
