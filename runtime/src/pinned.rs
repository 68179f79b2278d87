//! Host memory the device's copy engines reach directly: [`Pinned<T>`].

use crate::device::{Backend, Device};
use crate::error::Error;
#[cfg(feature = "gpu")]
use std::marker::PhantomData;

/// `len` values of `T` in page-locked host memory made by a device, used as a slice.
///
/// Launches and transfers that read or write a pinned slice (or any part of one) move it
/// with one copy by the GPU's DMA engines, where memory of the program's own is first
/// copied by the CPU into staging memory: `value_and_grad_into` from pinned arguments into
/// pinned outputs runs near the host link's speed, as CUDA programs do with
/// `cudaHostAlloc` (BENCHMARKS.md, "Pinned memory"). Fill it and read it like any slice;
/// every transfer has finished with it when the call that was given it returns.
///
/// A launch whose arguments and outputs are all pinned runs in chunks of up to 256 MiB
/// per buffer (64 MiB otherwise), and keeps those device buffers for its next launch.
///
/// Where the device has no such memory (the CPU device, a backend other than Vulkan, a
/// GPU without host memory outside the device) it is ordinary memory, and everything works
/// as with a `Vec`: [`Pinned::is_pinned`] tells which.
pub struct Pinned<T: bytemuck::Pod> {
    memory: Memory<T>,
    len: usize,
}

enum Memory<T> {
    Plain(Vec<T>),
    #[cfg(feature = "gpu")]
    Host(crate::gpu::PinnedHost, PhantomData<T>),
}

impl<T: bytemuck::Pod> Pinned<T> {
    /// Whether the memory is page-locked memory the device's copies reach (else it is a
    /// plain allocation).
    pub fn is_pinned(&self) -> bool {
        !matches!(self.memory, Memory::Plain(_))
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for Pinned<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.memory {
            Memory::Plain(v) => v,
            #[cfg(feature = "gpu")]
            // SAFETY: the allocation holds at least `len` values of `T`, aligned for `T`
            // (checked when made), zeroed then written only as `T` (any bits are a valid
            // `Pod`), and mapped while `self` lives.
            Memory::Host(h, _) => unsafe {
                std::slice::from_raw_parts(h.as_ptr().cast::<T>(), self.len)
            },
        }
    }
}

impl<T: bytemuck::Pod> std::ops::DerefMut for Pinned<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.memory {
            Memory::Plain(v) => v,
            #[cfg(feature = "gpu")]
            // SAFETY: as in `deref`; `&mut self` makes this the only view, and the GPU
            // touches the memory only during a call that borrows it.
            Memory::Host(h, _) => unsafe {
                std::slice::from_raw_parts_mut(h.as_ptr().cast::<T>(), self.len)
            },
        }
    }
}

impl<T: bytemuck::Pod> std::fmt::Debug for Pinned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("pinned", &self.is_pinned())
            .finish()
    }
}

impl Device {
    /// `len` zeroed values of `T` in page-locked host memory of this device ([`Pinned`]),
    /// or in ordinary memory where it has none. `Error::Unsupported` where `len` values do
    /// not fit in memory.
    pub fn pinned<T: bytemuck::Pod>(&self, len: usize) -> Result<Pinned<T>, Error> {
        let too_large = || {
            Error::Unsupported(format!(
                "{len} pinned values of {} do not fit in memory",
                std::any::type_name::<T>()
            ))
        };
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|b| isize::try_from(*b).is_ok())
            .ok_or_else(too_large)?;
        if let Some(host) = self.pinned_host(bytes, std::mem::align_of::<T>()) {
            return Ok(Pinned { memory: host, len });
        }
        let mut values = Vec::new();
        values.try_reserve_exact(len).map_err(|_| too_large())?;
        values.resize(len, T::zeroed());
        Ok(Pinned {
            memory: Memory::Plain(values),
            len,
        })
    }

    /// Page-locked memory of `bytes` aligned to `align`, where the device has it.
    fn pinned_host<T>(&self, bytes: usize, align: usize) -> Option<Memory<T>> {
        // Read only by the GPU backend (a build without it has the CPU alone).
        let _ = (bytes, align);
        match &self.backend {
            Backend::Cpu => None,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => {
                let host = g.pinned(bytes.max(4))?;
                (host.as_ptr() as usize)
                    .is_multiple_of(align)
                    .then_some(Memory::Host(host, PhantomData))
            }
        }
    }

    /// Caps every launch's chunks at `bytes` per buffer (at least one workgroup of
    /// elements), where they are 64 MiB (256 MiB for a launch all in pinned memory): tests
    /// cut small batches into many chunks with it. No effect on the CPU device.
    #[doc(hidden)] // Test-only; not a stable API.
    pub fn set_chunk_bytes(&self, bytes: u64) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.set_chunk_bytes(bytes);
        }
        let _ = bytes;
    }

    /// How many copies went straight between pinned memory and device buffers (a launch
    /// counts once per chunk): tests check that pinned slices take that path.
    #[doc(hidden)] // Test-only; not a stable API.
    pub fn pinned_copies(&self) -> u64 {
        match &self.backend {
            Backend::Cpu => 0,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.pinned_copies(),
        }
    }
}
