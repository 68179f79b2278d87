//! What a generated kernel tells the runtime about itself.
//!
//! The runtime knows nothing of Rust syntax or of the functions it runs: the generated code
//! describes each kernel with a [`KernelSpec`] whose numbers all come from the compiler's
//! ABI module (`gradfuse-shaders-gen::abi`), the one place the buffer layout is defined.

/// One output buffer of a kernel.
#[derive(Clone, Copy, Debug)]
pub struct OutputSpec {
    /// Its binding in group 0.
    pub binding: u32,
    /// f32 words per batch element.
    pub words: u32,
}

/// A compiled kernel: its WGSL, its buffers, and its CPU version.
///
/// Thread `i` of a launch of `n` elements reads the `input_words` words of element `i` from
/// the input buffer and writes `words` words of element `i` to each output buffer; the
/// uniform at `params_binding` holds `n` as its first u32.
#[derive(Debug)]
pub struct KernelSpec {
    /// A name for errors and GPU debuggers, e.g. `rosen::adjoint`.
    pub label: &'static str,
    /// The WGSL module.
    pub wgsl: &'static str,
    /// Its entry point.
    pub entry_point: &'static str,
    /// Threads per workgroup (the kernel's `@workgroup_size`).
    pub workgroup_size: u32,
    /// Workgroups per dispatch dimension; wider launches use the second dimension.
    pub max_workgroups_per_dim: u32,
    /// Binding of the uniform holding the element count.
    pub params_binding: u32,
    /// Binding of the input buffer.
    pub input_binding: u32,
    /// f32 words per element in the input buffer.
    pub input_words: u32,
    /// The output buffers.
    pub outputs: &'static [OutputSpec],
    /// The same computation for one element on the CPU: reads `input_words` words and
    /// writes every output's words, concatenated in the order of `outputs`.
    pub cpu: fn(&[f32], &mut [f32]),
}

impl KernelSpec {
    /// Output words per element, all outputs together.
    pub fn output_words(&self) -> usize {
        self.outputs.iter().map(|o| o.words as usize).sum()
    }
}
