//! How arguments, results and gradients map to buffers: the one place both emitters (and,
//! through the `KernelSpec` the Rust emitter writes, the runtime) read.
//!
//! Each batch element's arguments are its parameters' f32 words in declaration order, with
//! no padding (`f::Args` is `#[repr(C)]` of f32 and `[f32; N]` fields, so this is also its
//! memory layout). A batch is one `array<f32>` of `n * words` floats: thread `i` reads the
//! contiguous words `i * words ..`, so a warp reads one contiguous range and every fetched
//! cache line is used. Gradients use the same layout as the arguments without the words of
//! `#[constant]` arguments (`f::Grad`).

use crate::lower::{ParamKind, Signature};

/// Threads per workgroup of every generated kernel (256: measured on the H100 against 64,
/// with the hand-written kernels of `benches/gpu.rs`).
pub const WORKGROUP_SIZE: u32 = 256;
/// Workgroups per dispatch dimension that WebGPU guarantees; dispatches wider than this
/// use the second dimension.
pub const MAX_WORKGROUPS_PER_DIM: u32 = 65535;
/// Binding of the uniform `Params { n }` (the element count of this launch).
pub const PARAMS_BINDING: u32 = 0;
/// Binding of the arguments (`array<f32>`, read only).
pub const ARGS_BINDING: u32 = 1;
/// Binding of the values (`array<f32>`, one per element).
pub const VALUE_BINDING: u32 = 2;
/// Binding of the gradients (`array<f32>`, one per differentiable argument word per element).
pub const GRAD_BINDING: u32 = 3;
/// Size in bytes of the uniform `Params` block (one u32 used, padded to 16).
pub const PARAMS_BYTES: u64 = 16;

/// Where one parameter's words sit in an element's argument words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSlot {
    /// The parameter's name.
    pub name: String,
    /// `None` for an `f32`, `Some(n)` for `[f32; n]`.
    pub len: Option<usize>,
    /// Index of its first word.
    pub offset: u32,
    /// Whether it has a gradient (`false` for a `#[constant]` argument).
    pub differentiable: bool,
}

/// The argument words of one batch element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgLayout {
    /// One slot per parameter, in declaration order.
    pub slots: Vec<ParamSlot>,
    /// Words per element.
    pub words: u32,
}

impl ArgLayout {
    /// The layout of a signature's parameters.
    pub fn of(sig: &Signature) -> Self {
        let mut offset = 0u32;
        let slots = sig
            .params
            .iter()
            .map(|p| {
                let len = match p.kind {
                    ParamKind::Scalar => None,
                    ParamKind::Array(n) => Some(n),
                };
                let slot = ParamSlot {
                    name: p.name.to_string(),
                    len,
                    offset,
                    differentiable: !p.constant,
                };
                offset += len.unwrap_or(1) as u32;
                slot
            })
            .collect();
        ArgLayout {
            slots,
            words: offset,
        }
    }

    /// For each word: its parameter slot and the element index (`None` for a scalar).
    pub fn words(&self) -> Vec<(&ParamSlot, Option<usize>)> {
        self.slots
            .iter()
            .flat_map(|s| match s.len {
                None => vec![(s, None)],
                Some(n) => (0..n).map(|j| (s, Some(j))).collect(),
            })
            .collect()
    }

    /// The argument words that have a gradient, in order: the words of `f::Grad`, of the
    /// adjoint kernel's `grads` and of `jvp`'s tangent (`#[constant]` arguments have none).
    pub fn grad_words(&self) -> Vec<u32> {
        self.slots
            .iter()
            .filter(|s| s.differentiable)
            .flat_map(|s| s.offset..s.offset + s.len.unwrap_or(1) as u32)
            .collect()
    }

    /// Whether argument word `w` has a gradient.
    pub fn is_differentiable(&self, w: u32) -> bool {
        self.words()[w as usize].0.differentiable
    }

    /// A readable name for a word: `x` or `p_2`.
    pub fn word_name(&self, word: u32) -> String {
        let (slot, elem) = self.words()[word as usize];
        match elem {
            None => slot.name.clone(),
            Some(j) => format!("{}_{j}", slot.name),
        }
    }
}

/// How many f32 words a kernel moves per load or store for an element of `words` words:
/// 4 (`vec4<f32>`) or 2 (`vec2<f32>`) where the count allows, else 1. The buffers stay flat
/// f32 words (the layout above); only the kernel's view of them widens, so that a thread's
/// accesses are 16-byte transactions instead of strided 4-byte ones.
pub fn vector_lanes(words: u32) -> u32 {
    if words.is_multiple_of(4) {
        4
    } else if words.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Whether an adjoint kernel stages an element's `words` gradient words through workgroup
/// memory and stores the group's gradients contiguously: where no vector view exists (an
/// odd count) the per-thread stores would be strided 4-byte writes (34% of the copy
/// bandwidth on the H100 for 7 words). Up to 16 words, so that the stage
/// (`WORKGROUP_SIZE * words` f32) fits the 16 KiB of workgroup memory WebGPU guarantees.
pub fn stage_gradients(words: u32) -> bool {
    vector_lanes(words) == 1 && words > 1 && WORKGROUP_SIZE * words * 4 <= 16384
}

/// The WGSL type of `lanes` f32 words.
pub fn vector_type(lanes: u32) -> &'static str {
    match lanes {
        4 => "vec4<f32>",
        2 => "vec2<f32>",
        _ => "f32",
    }
}

/// Which generated kernel a module is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// Values only: outputs `values`.
    Forward,
    /// Value and full gradient from one pass: outputs `values` and `grads`.
    Adjoint,
}

impl KernelKind {
    /// The output buffers: `(binding, words per element, WGSL name)`.
    pub fn outputs(self, layout: &ArgLayout) -> Vec<(u32, u32, &'static str)> {
        match self {
            KernelKind::Forward => vec![(VALUE_BINDING, 1, "values")],
            KernelKind::Adjoint => vec![
                (VALUE_BINDING, 1, "values"),
                (GRAD_BINDING, layout.grad_words().len() as u32, "grads"),
            ],
        }
    }

    /// The WGSL entry point.
    pub fn entry_point(self) -> &'static str {
        match self {
            KernelKind::Forward => "forward",
            KernelKind::Adjoint => "adjoint",
        }
    }
}
