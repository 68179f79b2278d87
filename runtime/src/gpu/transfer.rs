//! Moving bytes between host memory and device buffers near the host link's speed.
//!
//! Three things made transfers run at a tenth of the link (4.8 GB/s up, 8 GB/s down on an
//! H100 whose pinned link carries about 53 GB/s): every transfer allocated fresh
//! host-visible memory (pinned and faulted in page by page on each use), one core copied
//! every byte (one core's memcpy is slower than a PCIe Gen5 link), and nothing overlapped
//! (the whole copy, then the whole DMA). Here staging buffers are kept and reused, a piece
//! is copied by several threads of a pool of our own, and the DMA of one piece runs while
//! the next is copied. An upload's pieces are in host memory where the device has it
//! (`host_memory.rs`), else in the buffers wgpu maps.

use super::host_memory::HostBuffer;
use super::{Gpu, lock};
use crate::error::Error;
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::Instant;

/// Where a map request's callback sends its result.
pub(super) type MapReceiver = std::sync::mpsc::Receiver<Result<(), wgpu::BufferAsyncError>>;

/// Bytes per staging buffer, the unit a transfer is cut into: large enough that a piece's
/// submit and map cost little against its DMA (32 MiB take 0.6 ms at 53 GB/s), small
/// enough that the pieces in flight hold little pinned memory.
const PIECE_BYTES: usize = 32 << 20;

/// Pieces in flight per transfer: one being copied, two moving.
const PIECES_IN_FLIGHT: usize = 3;

/// Staging buffers kept per direction between transfers.
const KEPT_PER_DIRECTION: usize = 4;

/// Uploads of at least this many bytes stage in host memory where the device has it
/// (`host_memory.rs`); smaller ones in wgpu's mapped buffers. Through host memory a piece
/// is copied, then moved by the DMA engines, so only the pieces after the first overlap
/// the copy with the link; across the BAR the copy is the transfer. On the H100
/// (`benches/transfers/h100_2026-11-27_host_staging.md`), 16 MiB took 0.96 ms through host
/// memory against 0.68 mapped, 256 MiB 7.8 against 9.4, 1 GiB 27.6 against 36.0.
const HOST_STAGING_FROM_BYTES: usize = 4 * PIECE_BYTES;

/// Below this, a transfer is one piece copied by one thread.
const PARALLEL_COPY_BYTES: usize = 4 << 20;

/// The slice each thread of a parallel copy takes at a time.
const COPY_SLICE_BYTES: usize = 1 << 20;

/// An upload's staging buffer of [`PIECE_BYTES`]: one wgpu maps, or one in host memory
/// ([`HostBuffer`]). (A readback's is always one wgpu maps: a plain `wgpu::Buffer`.)
enum Staging {
    Mapped {
        buffer: wgpu::Buffer,
        /// An upload buffer's re-arming map (it maps once its last copy has run).
        rearm: Option<MapReceiver>,
    },
    Host {
        host: HostBuffer,
        /// The submission of its last copy, which must have run before it is written.
        done: Option<wgpu::SubmissionIndex>,
    },
}

impl Staging {
    fn buffer(&self) -> &wgpu::Buffer {
        match self {
            Staging::Mapped { buffer, .. } => buffer,
            Staging::Host { host, .. } => &host.buffer,
        }
    }
}

/// The staging buffers kept between transfers, per direction.
#[derive(Default)]
pub(super) struct StagingPool {
    up: Vec<Staging>,
    down: Vec<wgpu::Buffer>,
}

/// The threads that copy between host memory and mapped staging memory. A pool of our own:
/// a copy blocks its caller until done, and in rayon's global pool a blocked caller runs
/// other tasks meanwhile, which may be the user's and may wait on a lock the caller holds.
fn copy_threads() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.clamp(1, 16))
            .thread_name(|i| format!("gradfuse copy {i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// `dst.copy_from_slice(src)`, by several threads when it is large.
pub(super) fn copy_parallel<T: bytemuck::Pod>(dst: &mut [T], src: &[T]) {
    let dst: &mut [u8] = bytemuck::cast_slice_mut(dst);
    let src: &[u8] = bytemuck::cast_slice(src);
    match copy_threads() {
        Some(pool) if dst.len() >= PARALLEL_COPY_BYTES => pool.install(|| {
            dst.par_chunks_mut(COPY_SLICE_BYTES)
                .zip(src.par_chunks(COPY_SLICE_BYTES))
                .for_each(|(d, s)| d.copy_from_slice(s));
        }),
        _ => dst.copy_from_slice(src),
    }
}

/// Writes `src` into a mapped buffer at `offset`, by several threads when it is large,
/// each through a view of its own slice of the range (views of disjoint ranges may be held
/// at once; mapped memory is written, never read: it may be write-combined).
pub(super) fn write_mapped(buffer: &wgpu::Buffer, offset: u64, src: &[u8]) -> Result<(), Error> {
    let write = |at: usize, s: &[u8]| -> Result<(), Error> {
        let start = offset + at as u64;
        buffer
            .slice(start..start + s.len() as u64)
            .get_mapped_range_mut()
            .map(|mut view| view.copy_from_slice(s))
            .map_err(|e| Error::Readback(e.to_string()))
    };
    match copy_threads() {
        Some(pool) if src.len() >= PARALLEL_COPY_BYTES => pool.install(|| {
            src.par_chunks(COPY_SLICE_BYTES)
                .enumerate()
                .try_for_each(|(i, s)| write(i * COPY_SLICE_BYTES, s))
        }),
        _ if src.is_empty() => Ok(()),
        _ => write(0, src),
    }
}

impl Gpu {
    /// Waits for a submission to finish; a device loss is reported as such.
    pub(super) fn wait_for(&self, submission: wgpu::SubmissionIndex) -> Result<(), Error> {
        let timeout = self.timeout();
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: Some(timeout),
            })
            .map(|_| ())
            .map_err(|e| match e {
                wgpu::PollError::Timeout => Error::Timeout(timeout),
                e => self
                    .check_lost()
                    .err()
                    .unwrap_or_else(|| Error::Readback(e.to_string())),
            })
    }

    /// Waits for a map request's callback. Another thread's poll may be delivering it just
    /// as this thread's wait for the submission returns, so the callback is awaited itself.
    pub(super) fn await_map(&self, rx: &MapReceiver) -> Result<(), Error> {
        let timeout = self.timeout();
        let deadline = Instant::now() + timeout;
        loop {
            match rx.try_recv() {
                Ok(r) => return r.map_err(|e| Error::Readback(e.to_string())),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    return Err(Error::Readback("a map request was dropped".into()));
                }
                Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() > deadline => {
                    return Err(Error::Timeout(timeout));
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    self.device
                        .poll(wgpu::PollType::Poll)
                        .map_err(|e| Error::Readback(e.to_string()))?;
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Copies `bytes` into `dst` at `offset`, ordered after the work submitted before and
    /// before any submitted after. Returns once the last piece is submitted: the host's
    /// bytes are copied, the DMA may still run. Bytes in pinned memory (`pinned.rs`) are
    /// moved by one copy, waited for.
    pub(crate) fn upload(
        &self,
        dst: &wgpu::Buffer,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), Error> {
        if let Some(route) = self.pinned_route(bytes) {
            return self.upload_pinned(&route, dst, offset, bytes.len() as u64);
        }
        if bytes.len() <= PARALLEL_COPY_BYTES {
            // wgpu's own staging: one small allocation, no wait.
            self.queue.write_buffer(dst, offset, bytes);
            self.queue.submit([]);
            return Ok(());
        }
        let host = bytes.len() >= HOST_STAGING_FROM_BYTES
            && self.host_staging_on()
            && self.has_host_memory();
        let mut ring: VecDeque<Staging> = VecDeque::new();
        for (i, piece) in bytes.chunks(PIECE_BYTES).enumerate() {
            let mut staging = match ring.len() {
                PIECES_IN_FLIGHT => ring.pop_front().expect("the ring is full"),
                _ => self.take_upload_staging(host),
            };
            self.write_piece(&mut staging, piece)?;
            let mut encoder = self.encoder("gradfuse upload");
            let at = offset + (i * PIECE_BYTES) as u64;
            encoder.copy_buffer_to_buffer(staging.buffer(), 0, dst, at, piece.len() as u64);
            let submission = self.queue.submit([encoder.finish()]);
            match &mut staging {
                Staging::Mapped { buffer, rearm } => {
                    let (tx, rx) = std::sync::mpsc::channel();
                    buffer.slice(..).map_async(wgpu::MapMode::Write, move |r| {
                        let _ = tx.send(r);
                    });
                    *rearm = Some(rx);
                }
                Staging::Host { done, .. } => *done = Some(submission),
            }
            ring.push_back(staging);
        }
        ring.into_iter().for_each(|s| self.keep_upload_staging(s));
        Ok(())
    }

    /// Writes `piece` at the start of an upload's staging buffer, once its last copy has
    /// run (a mapped one is unmapped after, ready for its copy).
    fn write_piece(&self, staging: &mut Staging, piece: &[u8]) -> Result<(), Error> {
        match staging {
            Staging::Mapped { buffer, rearm } => {
                if let Some(rearm) = rearm.take() {
                    self.await_map(&rearm)?;
                }
                write_mapped(buffer, 0, piece)?;
                buffer.unmap();
            }
            Staging::Host { host, done } => {
                if let Some(done) = done.take() {
                    self.wait_for(done)?;
                }
                copy_parallel(&mut host.bytes_mut()[..piece.len()], piece);
            }
        }
        Ok(())
    }

    /// Copies `out.len()` bytes of `src` from `offset` into `out`, once the work submitted
    /// before has run (into pinned memory, `pinned.rs`, by one copy).
    pub(crate) fn download(
        &self,
        src: &wgpu::Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), Error> {
        if let Some(route) = self.pinned_route(out) {
            return self.download_pinned(src, offset, &route, out.len() as u64);
        }
        let total = out.len();
        // Each piece in flight: its staging buffer, where it goes in `out`, its map request
        // and its submission.
        let mut in_flight: VecDeque<(
            wgpu::Buffer,
            std::ops::Range<usize>,
            MapReceiver,
            wgpu::SubmissionIndex,
        )> = VecDeque::new();
        let mut free: Vec<wgpu::Buffer> = Vec::new();
        let mut start = 0;
        while start < total || !in_flight.is_empty() {
            if start < total && in_flight.len() < PIECES_IN_FLIGHT {
                let len = PIECE_BYTES.min(total - start);
                let staging = free.pop().unwrap_or_else(|| self.take_read_staging());
                let mut encoder = self.encoder("gradfuse read");
                let from = offset + start as u64;
                encoder.copy_buffer_to_buffer(src, from, &staging, 0, len as u64);
                let submission = self.queue.submit([encoder.finish()]);
                let (tx, rx) = std::sync::mpsc::channel();
                staging
                    .slice(..len as u64)
                    .map_async(wgpu::MapMode::Read, move |r| {
                        let _ = tx.send(r);
                    });
                in_flight.push_back((staging, start..start + len, rx, submission));
                start += len;
                continue;
            }
            let (staging, range, mapped, submission) =
                in_flight.pop_front().expect("a piece is in flight");
            self.wait_for(submission)?;
            self.await_map(&mapped)?;
            {
                let view = staging
                    .slice(..range.len() as u64)
                    .get_mapped_range()
                    .map_err(|e| Error::Readback(e.to_string()))?;
                copy_parallel(&mut out[range], &view[..]);
            }
            staging.unmap();
            free.push(staging);
        }
        free.into_iter().for_each(|b| self.keep_read_staging(b));
        Ok(())
    }

    /// An upload's staging buffer, in host memory where `host` (a device that has it,
    /// [`HostBuffer`]; one wgpu maps if making it fails) or one wgpu maps (it comes
    /// mapped): a kept one of that kind, or a new one.
    fn take_upload_staging(&self, host: bool) -> Staging {
        {
            let mut pool = lock(&self.staging);
            let kept = (pool.up.iter()).position(|s| matches!(s, Staging::Host { .. }) == host);
            if let Some(at) = kept {
                return pool.up.swap_remove(at);
            }
        }
        let made = host.then(|| self.host_buffer(PIECE_BYTES as u64, "gradfuse upload"));
        if let Some(host) = made.flatten() {
            return Staging::Host { host, done: None };
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gradfuse upload"),
            size: PIECE_BYTES as u64,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        Staging::Mapped {
            buffer,
            rearm: None,
        }
    }

    /// A readback's staging buffer: a kept one, or a new one.
    fn take_read_staging(&self) -> wgpu::Buffer {
        if let Some(b) = lock(&self.staging).down.pop() {
            return b;
        }
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gradfuse read"),
            size: PIECE_BYTES as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Gives an upload's staging buffer back for later transfers, unless enough are kept.
    fn keep_upload_staging(&self, staging: Staging) {
        let mut pool = lock(&self.staging);
        let host = matches!(staging, Staging::Host { .. });
        let kind = |s: &&Staging| matches!(s, Staging::Host { .. }) == host;
        if pool.up.iter().filter(kind).count() < KEPT_PER_DIRECTION {
            pool.up.push(staging);
        }
    }

    /// Gives a readback's staging buffer back, unless enough are kept.
    fn keep_read_staging(&self, buffer: wgpu::Buffer) {
        let mut pool = lock(&self.staging);
        if pool.down.len() < KEPT_PER_DIRECTION {
            pool.down.push(buffer);
        }
    }

    /// Whether uploads stage through host memory where the device has it (the default).
    pub(super) fn host_staging_on(&self) -> bool {
        self.host_staging.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Turns staging through host memory on or off (a bench compares the two in one
    /// process).
    pub(crate) fn set_host_staging(&self, on: bool) {
        self.host_staging
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }
}
