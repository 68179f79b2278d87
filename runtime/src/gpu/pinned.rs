//! Page-locked host memory the caller fills and reads ([`crate::Pinned`]), moved by the
//! device's copy engines with no copy by the CPU.
//!
//! A transfer from the caller's own memory is two moves: the CPU copies it into staging
//! memory, then the DMA engines move the staging memory (`transfer.rs`). From pageable memory
//! nothing does better: PyTorch's own ring of pinned pieces moved a 2^24 launch's 576 MiB at
//! 35-43 GB/s on the H100, against the link's 51-55 GB/s (BENCHMARKS.md, "What staging in
//! host memory could reach"). Memory made by the device in host memory (`host_memory.rs`)
//! *is* staging memory: a slice of it is found by its address (as CUDA's unified addressing
//! finds a pinned pointer), and its transfers are one copy by the DMA engines, straight
//! between it and the device buffer.
//!
//! The runtime's transfers and launches are synchronous: they return once the GPU is done
//! with the caller's memory, so a pinned slice borrowed for one is never read or written by
//! the GPU after the borrow ends.

use super::host_memory::HostBuffer;
use super::{Gpu, lock};
use std::sync::{Arc, Mutex};

/// The pinned allocations of one device, by address.
pub(super) type Registry = Arc<Mutex<Vec<Region>>>;

/// One pinned allocation: its mapped bytes and the buffer copies read and write it through.
pub(super) struct Region {
    start: usize,
    len: usize,
    buffer: wgpu::Buffer,
}

/// Where a slice of pinned memory lies: its allocation's buffer and the slice's offset in it.
pub(super) struct Route {
    pub(super) buffer: wgpu::Buffer,
    pub(super) offset: u64,
}

/// A pinned allocation, registered with its device while it lives.
pub(crate) struct PinnedHost {
    host: HostBuffer,
    registry: Registry,
}

impl PinnedHost {
    /// The first byte (64-byte aligned at least).
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.host.as_ptr()
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        let start = self.host.as_ptr() as usize;
        lock(&self.registry).retain(|r| r.start != start);
    }
}

impl Gpu {
    /// `bytes` of zeroed pinned memory, registered so that transfers find it; `None` where
    /// the device has no host memory to give (`host_memory.rs`).
    pub(crate) fn pinned(&self, bytes: usize) -> Option<PinnedHost> {
        if !self.has_host_memory() {
            return None;
        }
        let mut host = self.host_buffer(bytes as u64, "gradfuse pinned")?;
        host.bytes_mut().fill(0);
        lock(&self.pinned).push(Region {
            start: host.as_ptr() as usize,
            len: host.len(),
            buffer: host.buffer.clone(),
        });
        Some(PinnedHost {
            host,
            registry: self.pinned.clone(),
        })
    }

    /// Where `bytes` lie in pinned memory of this device, if they do, and a buffer copy may
    /// move them (a whole number of 4-byte words at a 4-byte offset); `None` for an empty
    /// slice.
    pub(super) fn pinned_route(&self, bytes: &[u8]) -> Option<Route> {
        let (start, len) = (bytes.as_ptr() as usize, bytes.len());
        let aligned = len > 0 && len % 4 == 0;
        let regions = lock(&self.pinned);
        let region = regions
            .iter()
            .find(|r| start >= r.start && start + len <= r.start + r.len)?;
        let offset = (start - region.start) as u64;
        (aligned && offset.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)).then(|| Route {
            buffer: region.buffer.clone(),
            offset,
        })
    }

    /// Counts a copy straight between pinned memory and a device buffer (for tests: that
    /// the path without the CPU's copy was taken).
    pub(super) fn count_pinned_copy(&self) {
        self.pinned_copies
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The cap on launches' chunk bytes a test set ([`crate::Device::set_chunk_bytes`]).
    pub(super) fn chunk_bytes_cap(&self) -> u64 {
        self.chunk_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Caps launches' chunks at `bytes` per buffer (at least one workgroup of elements).
    pub(crate) fn set_chunk_bytes(&self, bytes: u64) {
        (self.chunk_bytes).store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many copies went straight between pinned memory and device buffers.
    pub(crate) fn pinned_copies(&self) -> u64 {
        self.pinned_copies
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Copies `bytes` of pinned memory (at `route`) into `dst` at `offset` and waits for
    /// the copy: the caller may write its memory again once this returns.
    pub(super) fn upload_pinned(
        &self,
        route: &Route,
        dst: &wgpu::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<(), crate::error::Error> {
        let mut encoder = self.encoder("gradfuse pinned upload");
        encoder.copy_buffer_to_buffer(&route.buffer, route.offset, dst, offset, len);
        self.count_pinned_copy();
        self.wait_for(self.queue.submit([encoder.finish()]))
    }

    /// Copies `len` bytes of `src` from `offset` into pinned memory (at `route`), once the
    /// work submitted before has run, and waits for the copy. The memory is host-coherent
    /// and the wait is on the submission's fence; Vulkan also asks for a barrier making the
    /// copy's writes visible to host reads, which wgpu records only for buffers it maps
    /// (this one it never maps). Without it the words read back are the same on NVIDIA's
    /// driver and lavapipe (`tests/pinned.rs`, the transfers bench's check).
    pub(super) fn download_pinned(
        &self,
        src: &wgpu::Buffer,
        offset: u64,
        route: &Route,
        len: u64,
    ) -> Result<(), crate::error::Error> {
        let mut encoder = self.encoder("gradfuse pinned read");
        encoder.copy_buffer_to_buffer(src, offset, &route.buffer, route.offset, len);
        self.count_pinned_copy();
        self.wait_for(self.queue.submit([encoder.finish()]))
    }
}

/// Where a launch's input and outputs lie in pinned memory, each if it does: its chunks'
/// copies then go straight between there and the device buffers the kernel binds.
pub(super) struct Routes {
    pub(super) input: Option<Route>,
    pub(super) outputs: Vec<Option<Route>>,
}

impl Routes {
    /// Whether any of the launch's slices is pinned.
    pub(super) fn any(&self) -> bool {
        self.input.is_some() || self.outputs.iter().any(Option::is_some)
    }

    /// Whether all of them are: the launch needs no staging memory of its own.
    pub(super) fn all(&self) -> bool {
        self.input.is_some() && self.outputs.iter().all(Option::is_some)
    }
}

impl Gpu {
    /// The routes of a launch's `input` and `outputs`.
    pub(super) fn routes(&self, input: &[f32], outputs: &[&mut [f32]]) -> Routes {
        Routes {
            input: self.pinned_route(bytemuck::cast_slice(input)),
            outputs: (outputs.iter())
                .map(|o| self.pinned_route(bytemuck::cast_slice(o)))
                .collect(),
        }
    }
}
