//! IR to WGSL: one compute kernel per [`KernelKind`](crate::abi::KernelKind), one thread per batch element.
//!
//! The output is meant to be read in review: a header says which function and which buffers,
//! every value is a `let` named after the Rust binding it came from (`d_x` is the adjoint
//! of `x`), and the names match the CPU versions emitted by [`crate::emit_rust`].
//!
//! [`emit_kernel`] reads as its phases: a `plan::KernelPlan` decides once which buffers
//! the kernel has and how they are read and written; the loads, the shared-gradient sums,
//! the body (`body`), the stores, the header and the entry point are each written by a
//! function of `kernel` from that plan.

mod arrays;
mod body;
mod fields;
mod hoist;
mod kernel;
mod loads;
mod network;
mod outer_sums;
mod plan;
mod quads;
mod reduce;
mod rows;
mod shared_sums;
mod static_runs;
mod stores;
mod streams;
mod tape;

pub use crate::names::{REDUCE_LEVELS_FN, REDUCE_RUN_FN, REDUCE_STAGE_FN};
pub use kernel::{emit_gathered_kernel, emit_kernel, emit_kernel_with_elements};
pub use network::{
    FIRST_LAYER_REGISTER_INPUTS, FIRST_LAYER_ROW_INPUTS, HiddenLayer, MIN_PADDED_ROWS,
    MULTIPROCESSOR_WORKGROUP_BYTES, NetworkPlan, OutputRow,
    SHARED_UNIFORM as NETWORK_SHARED_UNIFORM, WORKGROUP_BYTES as NETWORK_WORKGROUP_BYTES,
    WordIndex, emit_network_adjoint, emit_network_value, max_outputs, network_workgroup_size,
    padded_width, workgroups_sharing,
};
pub use reduce::emit_reduce_kernel;
pub use shared_sums::{elements_per_thread, outer_summed_loops, streams_shared_gradient};

use crate::signature::Precision;

/// The lanes of a WGSL vector, in order.
const COMPONENTS: [&str; 4] = ["x", "y", "z", "w"];

/// A WGSL literal of `precision` (non-finite values as bit casts: WGSL has no literal for
/// them; an f64 one from its f32 twin, which converts exactly).
pub fn float_literal(v: f64, precision: Precision) -> String {
    if precision == Precision::F64 {
        return if v.is_finite() {
            if v.is_sign_negative() {
                format!("({v:?}lf)")
            } else {
                format!("{v:?}lf")
            }
        } else {
            format!("f64({})", float_literal(v, Precision::F32))
        };
    }
    let x = v as f32;
    if x.is_nan() {
        "bitcast<f32>(0x7fc00000u)".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "bitcast<f32>(0x7f800000u)".into()
        } else {
            "bitcast<f32>(0xff800000u)".into()
        }
    } else if x.is_sign_negative() {
        format!("({x:?}f)")
    } else {
        format!("{x:?}f")
    }
}

/// ` + {k}u`, or nothing for 0: a constant offset added to an index in WGSL.
fn plus(k: usize) -> String {
    if k == 0 {
        String::new()
    } else {
        format!(" + {k}u")
    }
}
