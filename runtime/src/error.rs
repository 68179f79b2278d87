//! Run-time errors: every failure of the runtime is one of these values, never a panic.

/// What can go wrong when running gradfuse kernels.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No GPU adapter could be found.
    #[error("no GPU adapter found: {0}")]
    NoAdapter(String),
    /// `GRADFUSE_REQUIRE_GPU=1` is set and no GPU could be used.
    #[error(
        "GRADFUSE_REQUIRE_GPU=1 is set but the GPU cannot be used ({0}); unset it to allow the CPU fallback"
    )]
    GpuRequired(String),
    /// gradfuse was compiled without its `gpu` feature.
    #[error("gradfuse was built without the `gpu` feature: only Device::cpu() is available")]
    GpuNotCompiled,
    /// The adapter refused to open a device.
    #[error("could not open the GPU device: {0}")]
    RequestDevice(String),
    /// The device was lost (driver reset, GPU removed, ...).
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    /// An allocation on the device failed.
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    /// A buffer had the wrong length.
    #[error("{what}: expected {expected}, got {got}")]
    ShapeMismatch {
        /// Which buffer.
        what: String,
        /// The length it must have.
        expected: usize,
        /// The length it has.
        got: usize,
    },
    /// The GPU rejected a kernel or a launch (a bug in gradfuse: please report it).
    #[error("kernel `{label}` was rejected by the GPU: {message}")]
    Validation {
        /// The kernel's label.
        label: String,
        /// The driver's or wgpu's message.
        message: String,
    },
    /// An index array has an entry past the rows of the blocks it indexes.
    #[error("index entry {entry} is row {row}, but the block has {rows} rows")]
    IndexOutOfRange {
        /// Which entry.
        entry: usize,
        /// The row it names.
        row: usize,
        /// The rows there are.
        rows: usize,
    },
    /// A buffer was bound to a launch or read on a device other than the one that made it.
    #[error("wrong device: {0}")]
    WrongDevice(String),
    /// A launch or step would write a buffer it also reads or writes through another
    /// binding.
    #[error("{0}")]
    Aliased(String),
    /// A request the runtime cannot serve (a buffer of a type that is not made of 4-byte
    /// words, a size beyond the device's limits, a hyper-parameter out of range).
    #[error("{0}")]
    Unsupported(String),
    /// The GPU did not finish in the device's time limit ([`crate::Device::set_timeout`]):
    /// the work may still be running; its results are dropped.
    #[error("the GPU did not finish within {0:?}; its work was abandoned (Device::set_timeout)")]
    Timeout(std::time::Duration),
    /// Reading results back from the device failed.
    #[error("reading results back from the GPU failed: {0}")]
    Readback(String),
}

/// A [`Error::ShapeMismatch`] about `what` unless `expected == got`. `what` is written out
/// only for the error: a recorded step checks every launch, and formatting its messages
/// up front was a fifth of the host's time per step.
pub(crate) fn mismatch(
    what: impl std::fmt::Display,
    expected: usize,
    got: usize,
) -> Result<(), Error> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            what: what.to_string(),
            expected,
            got,
        })
    }
}
