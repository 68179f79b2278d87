//! Device-resident data: typed buffers that stay on a device between launches.
//!
//! A [`Buffer<T>`] holds `len` values of a plain-old-data type made of 4-byte words (`f32`,
//! `u32`, `[f32; 3]`, a function's `Args`, `Grad` or `Shared`). It is made from a slice
//! ([`Device::buffer`]), read back only when asked ([`Device::read`]), and bound to launches
//! and optimizer steps recorded with [`Device::record`](crate::Device::record).

use crate::device::Device;
use crate::error::{Error, mismatch};
pub use crate::raw::RawBuffer;
pub(crate) use crate::raw::{SCRATCH_KEPT, ScratchRole, Storage};
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError, RwLock};

/// `len` values of `T`, resident on one device.
///
/// Buffers are handles: recorded work holds on to them until it has run, so dropping a
/// buffer whose launch is still in flight is safe.
pub struct Buffer<T> {
    raw: Arc<RawBuffer>,
    len: usize,
    _values: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .finish()
    }
}

impl<T> Buffer<T> {
    /// How many values of `T` it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same device memory viewed as values of another type: `n` `f32` outputs of one
    /// launch as `n / 4` `[f32; 4]` rows of the next, without a copy. The view shares the
    /// storage (a launch that reads one view and writes the other is refused as aliased).
    /// `Error::ShapeMismatch` unless the words divide into whole values of `U`.
    pub fn cast<U: bytemuck::Pod>(&self) -> Result<Buffer<U>, Error> {
        let per = words_per::<U>()?;
        if !self.raw.words.is_multiple_of(per) {
            return Err(Error::ShapeMismatch {
                what: format!(
                    "the 4-byte words of a buffer viewed as {} (of {per} words each)",
                    std::any::type_name::<U>()
                ),
                expected: self.raw.words.next_multiple_of(per),
                got: self.raw.words,
            });
        }
        Ok(Buffer {
            raw: Arc::clone(&self.raw),
            len: self.raw.words / per,
            _values: PhantomData,
        })
    }

    /// The untyped storage, for generated launchers.
    #[doc(hidden)]
    pub fn raw(&self) -> &Arc<RawBuffer> {
        &self.raw
    }
}

impl Buffer<f32> {
    /// Every word of a raw buffer, as f32 values.
    pub(crate) fn words_of(raw: &Arc<RawBuffer>) -> Buffer<f32> {
        Buffer {
            raw: Arc::clone(raw),
            len: raw.words,
            _values: PhantomData,
        }
    }
}

/// 4-byte words per value of `T`: buffers hold types made of whole words.
pub(crate) fn words_per<T: bytemuck::Pod>() -> Result<usize, Error> {
    let size = std::mem::size_of::<T>();
    if size == 0 || !size.is_multiple_of(4) {
        return Err(Error::Unsupported(format!(
            "a Buffer holds values of whole 4-byte words; {} has {size} bytes",
            std::any::type_name::<T>()
        )));
    }
    Ok(size / 4)
}

impl Device {
    /// A buffer on this device holding a copy of `values`.
    pub fn buffer<T: bytemuck::Pod>(&self, values: &[T]) -> Result<Buffer<T>, Error> {
        words_per::<T>()?;
        Ok(Buffer {
            raw: Arc::new(self.raw_buffer(bytemuck::cast_slice(values))?),
            len: values.len(),
            _values: PhantomData,
        })
    }

    /// A buffer of `len` values of `T` whose words are all zero.
    pub fn zeros<T: bytemuck::Pod>(&self, len: usize) -> Result<Buffer<T>, Error> {
        let words = len.checked_mul(words_per::<T>()?).ok_or_else(|| {
            Error::Unsupported(format!("a buffer of {len} values does not fit in memory"))
        })?;
        let storage = match &self.backend {
            crate::device::Backend::Cpu => Storage::Cpu(RwLock::new(vec![0; words])),
            #[cfg(feature = "gpu")]
            crate::device::Backend::Gpu(g) => {
                Storage::Gpu(g.owned(g.surface(g.resident_buffer_of(words, None))?))
            }
        };
        Ok(Buffer {
            raw: Arc::new(RawBuffer::new(self.id(), words, storage)),
            len,
            _values: PhantomData,
        })
    }

    /// A copy of the buffer's values, once all work submitted before has run.
    pub fn read<T: bytemuck::Pod>(&self, buffer: &Buffer<T>) -> Result<Vec<T>, Error> {
        let mut values = vec![T::zeroed(); buffer.len];
        self.read_into(buffer, &mut values)?;
        Ok(values)
    }

    /// Copies the buffer's values into `out` (of the same length), once all work submitted
    /// before has run: [`Device::read`] into memory the caller keeps, which a loop that
    /// reads every step then allocates and faults in once.
    pub fn read_into<T: bytemuck::Pod>(
        &self,
        buffer: &Buffer<T>,
        out: &mut [T],
    ) -> Result<(), Error> {
        self.check_owns(buffer.raw(), "the buffer to read")?;
        mismatch("values read from a buffer", buffer.len, out.len())?;
        self.read_words(buffer.raw(), bytemuck::cast_slice_mut(out))
    }

    /// Overwrites the buffer's values with `values` (of the same length), after all work
    /// submitted before and before any submitted after.
    pub fn write<T: bytemuck::Pod>(&self, buffer: &Buffer<T>, values: &[T]) -> Result<(), Error> {
        self.check_owns(buffer.raw(), "the buffer to write")?;
        mismatch("values written to a buffer", buffer.len, values.len())?;
        self.write_words(buffer.raw(), bytemuck::cast_slice(values))
    }

    /// An error unless `buffer` was made by this device (`what` is written out only for
    /// the error).
    pub(crate) fn check_owns(
        &self,
        buffer: &RawBuffer,
        what: impl std::fmt::Display,
    ) -> Result<(), Error> {
        if buffer.device == self.id() {
            Ok(())
        } else {
            Err(Error::WrongDevice(format!(
                "{what} was made by another device than {}",
                self.describe()
            )))
        }
    }
}

impl Device {
    /// Device storage holding `bytes` (whole 4-byte words).
    fn raw_buffer(&self, bytes: &[u8]) -> Result<RawBuffer, Error> {
        let n = bytes.len() / 4;
        let storage = match &self.backend {
            crate::device::Backend::Cpu => {
                Storage::Cpu(RwLock::new(bytemuck::pod_collect_to_vec(bytes)))
            }
            #[cfg(feature = "gpu")]
            crate::device::Backend::Gpu(g) => {
                Storage::Gpu(g.owned(g.surface(g.resident_buffer_of(n, Some(bytes)))?))
            }
        };
        Ok(RawBuffer::new(self.id(), n, storage))
    }

    /// Copies the words of a buffer of this device into `out` (its whole length), once the
    /// work submitted before has run.
    fn read_words(&self, buffer: &RawBuffer, out: &mut [u8]) -> Result<(), Error> {
        match &buffer.storage {
            Storage::Cpu(_) => {
                out.copy_from_slice(bytemuck::cast_slice(&buffer.cpu_read()));
                Ok(())
            }
            #[cfg(feature = "gpu")]
            Storage::Gpu(b) => match &self.backend {
                crate::device::Backend::Gpu(g) => g.surface(g.read_resident(&b.buffer, out)),
                crate::device::Backend::Cpu => unreachable!("checked by check_owns"),
            },
        }
    }

    /// Overwrites a buffer of this device with `bytes` (its whole length).
    fn write_words(&self, buffer: &RawBuffer, bytes: &[u8]) -> Result<(), Error> {
        match &buffer.storage {
            Storage::Cpu(_) => {
                buffer
                    .cpu_write()
                    .copy_from_slice(&bytemuck::pod_collect_to_vec::<u8, u32>(bytes));
                Ok(())
            }
            #[cfg(feature = "gpu")]
            Storage::Gpu(b) => match &self.backend {
                crate::device::Backend::Gpu(g) => g.surface(g.write_resident(&b.buffer, bytes)),
                crate::device::Backend::Cpu => unreachable!("checked by check_owns"),
            },
        }
    }
}

impl Device {
    /// Storage of `words` words for a launch's intermediate rows, with no upload: the same
    /// buffer for every launch of this size and role. Sharing is safe because a device runs
    /// recorded work in order (one GPU queue; the CPU device's steps at submit), so a later
    /// launch overwrites the rows only after the earlier one has used them. Its words are
    /// whatever the last launch left: every launch writes all the words it reads.
    pub(crate) fn scratch(&self, role: ScratchRole, words: usize) -> Result<Arc<RawBuffer>, Error> {
        let mut pool = self
            .scratch
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = pool.get(&(role, words)) {
            return Ok(Arc::clone(b));
        }
        let storage = match &self.backend {
            crate::device::Backend::Cpu => Storage::Cpu(RwLock::new(vec![0; words])),
            #[cfg(feature = "gpu")]
            crate::device::Backend::Gpu(g) => {
                Storage::Gpu(g.owned(g.surface(g.scratch_buffer(words))?))
            }
        };
        let buffer = Arc::new(RawBuffer::new(self.id(), words, storage));
        if pool.len() >= SCRATCH_KEPT {
            pool.clear();
        }
        pool.insert((role, words), Arc::clone(&buffer));
        Ok(buffer)
    }
}
