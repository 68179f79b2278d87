//! The untyped words behind every [`Buffer`](crate::Buffer), and the scratch rows devices
//! keep for gathered launches. Apart from `buffer.rs` so that a device can own scratch rows
//! without the device and buffer modules importing each other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The untyped words of a [`Buffer`]: what launches bind. Not a stable API.
#[doc(hidden)]
pub struct RawBuffer {
    /// Unique among all buffers: launches refuse to write a buffer they also read.
    pub(crate) id: u64,
    /// The device that made it.
    pub(crate) device: u64,
    /// 4-byte words.
    pub(crate) words: usize,
    pub(crate) storage: Storage,
}

impl std::fmt::Debug for RawBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawBuffer")
            .field("id", &self.id)
            .field("words", &self.words)
            .finish_non_exhaustive()
    }
}

pub(crate) enum Storage {
    Cpu(RwLock<Vec<u32>>),
    #[cfg(feature = "gpu")]
    Gpu(crate::gpu::OwnedBuffer),
}

impl RawBuffer {
    pub(crate) fn new(device: u64, words: usize, storage: Storage) -> RawBuffer {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        RawBuffer {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            device,
            words,
            storage,
        }
    }

    /// The words of a CPU buffer, to read. A panic while a lock was held leaves whole words
    /// behind, so poisoning is not an error.
    pub(crate) fn cpu_read(&self) -> RwLockReadGuard<'_, Vec<u32>> {
        match &self.storage {
            Storage::Cpu(w) => w.read().unwrap_or_else(PoisonError::into_inner),
            #[cfg(feature = "gpu")]
            Storage::Gpu(_) => unreachable!("checked by Recording: a CPU launch binds CPU buffers"),
        }
    }

    /// The words of a CPU buffer, to write.
    pub(crate) fn cpu_write(&self) -> RwLockWriteGuard<'_, Vec<u32>> {
        match &self.storage {
            Storage::Cpu(w) => w.write().unwrap_or_else(PoisonError::into_inner),
            #[cfg(feature = "gpu")]
            Storage::Gpu(_) => unreachable!("checked by Recording: a CPU launch binds CPU buffers"),
        }
    }

    #[cfg(feature = "gpu")]
    pub(crate) fn gpu(&self) -> &wgpu::Buffer {
        match &self.storage {
            Storage::Gpu(b) => &b.buffer,
            Storage::Cpu(_) => unreachable!("checked by Recording: a GPU launch binds GPU buffers"),
        }
    }
}

/// What a scratch buffer holds within one gathered launch: the two must never be one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ScratchRole {
    /// The kernel's assembled argument rows.
    Args,
    /// The kernel's per-element gradient rows, before the scatter.
    Grads,
    /// A dot product's per-workgroup partial sums.
    #[cfg(feature = "gpu")]
    Partials,
    /// A scatter's per-chunk partial sums, for rows read by many elements.
    #[cfg(feature = "gpu")]
    Chunks,
}

/// Scratch buffers by role and exact size. Launches bind a buffer's whole length, so a
/// buffer is reused only by launches of the same size; at most [`SCRATCH_KEPT`] are kept, so
/// a sweep over many sizes does not keep all of them alive.
#[derive(Default)]
pub(crate) struct ScratchPool(
    pub(crate) std::sync::Mutex<std::collections::HashMap<(ScratchRole, usize), Arc<RawBuffer>>>,
);

/// How many scratch buffers a device keeps between launches.
pub(crate) const SCRATCH_KEPT: usize = 16;
