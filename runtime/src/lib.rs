//! The gradfuse runtime: devices (GPU through wgpu, CPU through rayon), the pipeline
//! cache, the buffer pool, chunked batch launches, and the scalar types of the generic CPU
//! code ([`Real`], [`Dual`]). It knows nothing of Rust syntax: generated code describes
//! each kernel with a [`KernelSpec`].
#![warn(missing_docs)]

mod batched_lm;
mod buffer;
mod cpu;
mod device;
mod dual;
mod error;
mod fast_hash;
mod gather;
mod gather_launch;
#[cfg(feature = "gpu")]
mod gpu;
mod least_squares;
mod lm_passes;
mod optim;
mod pinned;
mod products;
mod raw;
mod real;
mod recording;
mod spec;
mod vectors;

pub use batched_lm::{BatchedLm, BatchedSummary, Termination};
pub use buffer::Buffer;
#[doc(hidden)]
pub use buffer::RawBuffer;
#[doc(hidden)]
pub use device::ResourceCounts;
pub use device::{Device, REQUIRE_GPU_ENV};
pub use dual::{Dual, HyperDual};
pub use error::Error;
#[doc(hidden)]
pub use gather::GatherField;
pub use gather::{Index, Source};
#[doc(hidden)]
pub use gather_launch::GatherOutputs;
pub use least_squares::{
    BlockId, IterationReport, LevenbergMarquardt, Loss, MAX_ROW_WORDS, Problem, Residuals, Summary,
};
#[doc(hidden)]
pub use least_squares::{CgTiming, ResidualArgument};
pub use optim::{Adam, Momentum};
pub use pinned::Pinned;
#[doc(hidden)]
pub use products::JacobianColumns;
pub use real::Real;
#[doc(hidden)]
pub use recording::Bindings;
pub use recording::Recording;
#[doc(hidden)]
pub use spec::KernelTime;
#[doc(hidden)]
pub use spec::tangent_rows;
pub use spec::{
    ARGS_BINDING_ALIGN, DISABLE_F64_ENV, FieldSpec, Floats, GatheredSpec, KernelSpec, OutputSpec,
    Precision, ReductionSpec, RowsEntry, SharedSpec, WORKGROUP_BYTES_OVERRIDE,
    WORKGROUP_SIZE_OVERRIDE,
};
#[doc(hidden)]
pub use vectors::Coefficient;
