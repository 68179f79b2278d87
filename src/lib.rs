//! gradfuse: write a numeric Rust function once, mark it `#[differentiable]`, and get at
//! compile time its generic CPU version, CPU reverse and forward mode, and fused WGSL
//! kernels with a typed launcher that runs batches on any GPU through wgpu (or on the CPU
//! with rayon).
//!
//! ```
//! use gradfuse::differentiable;
//!
//! #[differentiable]
//! pub fn rosen(x: f32, p: [f32; 2]) -> f32 {
//!     let a = p[0] - x;
//!     let b = p[1] - x * x;
//!     a * a + 100.0 * b * b
//! }
//!
//! // The function itself, unchanged.
//! assert_eq!(rosen(1.0, [1.0, 1.0]), 0.0);
//! // Reverse mode on the CPU.
//! let (v, g) = rosen::value_and_grad(&rosen::Args { x: 0.5, p: [1.0, 2.0] });
//! assert!((g.x - (-2.0 * 0.5 - 400.0 * 0.5 * (2.0 - 0.25))).abs() < 1e-3);
//! // Batches on a device: the GPU if there is one, else the CPU.
//! let device = gradfuse::Device::cpu();
//! let (values, grads) = rosen::kernel(&device)
//!     .value_and_grad(&[rosen::Args { x: 0.5, p: [1.0, 2.0] }])
//!     .unwrap();
//! assert_eq!(values[0], v);
//! assert_eq!(grads[0], g);
//! ```
//!
//! For `#[differentiable] pub fn f(x: f32, p: [f32; 3]) -> f32` the module `f` holds:
//! `Args` and `Grad` (`#[repr(C)]`, `bytemuck::Pod`, fields named after the parameters),
//! `eval<S: Real>`, `value_and_grad(&Args) -> (f32, Grad)`, `jvp(&Args, &Grad) -> (f32, f32)`,
//! `WGSL_FORWARD`, `WGSL_ADJOINT`, and `kernel(&Device)` with `.value(&[Args])` and
//! `.value_and_grad(&[Args])`.

// Generated code names this crate `::gradfuse`, also inside its own doc tests and examples.
extern crate self as gradfuse;

#[doc(hidden)]
pub use gradfuse_macros::__differentiable_with;
pub use gradfuse_macros::differentiable;
pub use gradfuse_runtime::{
    ARGS_BINDING_ALIGN, Adam, BatchedLm, BatchedSummary, BlockId, Buffer, DISABLE_F64_ENV, Device,
    Dual, Error, FieldSpec, Floats, GatheredSpec, HyperDual, Index, IterationReport, KernelSpec,
    KernelTime, LevenbergMarquardt, Loss, MAX_ROW_WORDS, Momentum, OutputSpec, Pinned, Precision,
    Problem, REQUIRE_GPU_ENV, Real, Recording, ReductionSpec, Residuals, RowsEntry, SharedSpec,
    Source, Summary, Termination, WORKGROUP_BYTES_OVERRIDE, WORKGROUP_SIZE_OVERRIDE,
};
#[doc(hidden)]
pub use gradfuse_runtime::{
    Bindings, Coefficient, GatherField, GatherOutputs, JacobianColumns, RawBuffer,
    ResidualArgument, tangent_rows,
};

/// Re-exported for generated code (`Args` and `Grad` are `bytemuck::Pod`) and for users who
/// cast batches to and from bytes.
pub use bytemuck;
