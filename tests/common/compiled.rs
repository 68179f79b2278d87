//! The launch spec of a kernel of a function compiled at run time (`compile_str`), for the
//! tests and benches that compile functions nobody wrote into the crate
//! (`tests/random_shared_gpu.rs`, `benches/corpus`, which includes this file by path).

use gradfuse::{KernelSpec, OutputSpec, ReductionSpec, SharedSpec};
use gradfuse_shaders_gen::Compiled;
use gradfuse_shaders_gen::abi::{self, KernelKind};
use gradfuse_shaders_gen::launch::{KernelLaunch, kernel_launch, per_element_launch};

/// The runtime's launch description of kernel `kind` of `c`, an f32 function, labelled
/// `name::entry_point` (leaked: specs are `'static`), with its fallback of one element a
/// thread where `c` has one. It runs on the GPU only.
pub fn compiled_spec(name: &str, c: &Compiled, kind: KernelKind) -> &'static KernelSpec {
    let wgsl = match kind {
        KernelKind::Forward => &c.wgsl_forward,
        KernelKind::Tangent => &c.wgsl_tangent,
        _ => &c.wgsl_reverse,
    };
    let fallback = c.fallback(kind).map(|wgsl| {
        let label = format!("{name}::{} (one element a thread)", kind.entry_point());
        spec_of(&label, c, kind, per_element_launch(c, kind), wgsl, None)
    });
    let label = format!("{name}::{}", kind.entry_point());
    spec_of(&label, c, kind, kernel_launch(c, kind), wgsl, fallback)
}

/// The spec of `launch`, kernel `kind` of `c` whose module is `wgsl`.
fn spec_of(
    label: &str,
    c: &Compiled,
    kind: KernelKind,
    launch: KernelLaunch,
    wgsl: &str,
    fallback: Option<&'static KernelSpec>,
) -> &'static KernelSpec {
    let name = label.split("::").next().unwrap_or(label);
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let shared = launch.shared.map(|s| {
        let reduction = (s.reduced).then(|| ReductionSpec {
            elements_per_thread: s.elements_per_thread,
            divides_chunks: s.divides_chunks,
            partials_binding: abi::PARTIALS_BINDING,
            label: leak(format!("{name}::reduce")),
            wgsl: leak(c.wgsl_reduce.clone().unwrap_or_default()),
            entry_point: "reduce",
            params_binding: abi::REDUCE_PARAMS_BINDING,
            input_binding: abi::REDUCE_INPUT_BINDING,
            output_binding: abi::REDUCE_OUTPUT_BINDING,
            words_per_workgroup: abi::REDUCE_WORDS_PER_WORKGROUP,
        });
        &*Box::leak(Box::new(SharedSpec {
            binding: abi::SHARED_BINDING,
            words: s.words,
            uniform: s.uniform,
            reduction,
        }))
    });
    let outputs: Vec<OutputSpec> = launch
        .outputs
        .iter()
        .map(|&(binding, words)| OutputSpec { binding, words })
        .collect();
    Box::leak(Box::new(KernelSpec {
        label: leak(label.to_string()),
        wgsl: leak(wgsl.to_string()),
        entry_point: kind.entry_point(),
        workgroup_size: launch.workgroup_size,
        max_workgroups_per_dim: abi::MAX_WORKGROUPS_PER_DIM,
        params_binding: abi::PARAMS_BINDING,
        input_binding: abi::ARGS_BINDING,
        input_words: launch.input_words,
        outputs: Box::leak(outputs.into_boxed_slice()),
        shared,
        work_per_element: launch.work_per_element,
        precision: gradfuse::Precision::F32,
        cpu: gpu_only,
        bounds_checks: launch.bounds_checks,
        workgroup_bytes: launch.workgroup_bytes,
        fallback,
    }))
}

/// The CPU side of a spec compiled at run time: there is no Rust version to call.
fn gpu_only(_: &[f32], _: &mut [f32]) {
    unreachable!("kernels compiled at run time run on the GPU only")
}
