//! The gradfuse runtime: devices (GPU through wgpu, CPU through rayon), the pipeline
//! cache, the buffer pool, chunked batch launches, and the scalar types of the generic CPU
//! code ([`Real`], [`Dual`]). It knows nothing of Rust syntax: generated code describes
//! each kernel with a [`KernelSpec`].
#![warn(missing_docs)]

mod cpu;
mod device;
mod dual;
mod error;
#[cfg(feature = "gpu")]
mod gpu;
mod real;
mod spec;

pub use device::{Device, REQUIRE_GPU_ENV};
pub use dual::Dual;
pub use error::Error;
pub use real::Real;
#[doc(hidden)]
pub use spec::KernelTime;
pub use spec::{KernelSpec, OutputSpec, ReductionSpec, SharedSpec};
