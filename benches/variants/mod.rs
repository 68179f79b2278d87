//! Variants of generated kernels on the same buffers, for the GPU bench's tables: a
//! hand-written kernel with a generated one's bindings, the adjoint with its workgroup sum
//! cut out, with several elements per thread, and with its shared words' lanes divided at
//! run time.

use crate::ceilings::{no_cpu, spec_shared};
use gradfuse::KernelSpec;
use gradfuse_shaders_gen::compile_str;
use gradfuse_shaders_gen::emit_wgsl::{REDUCE_LEVELS_FN, REDUCE_RUN_FN, REDUCE_STAGE_FN};
use std::fmt::Write as _;

/// A kernel with the buffers of a generated one (its words, outputs and shared arguments,
/// the reduction's second pass included): a hand-written or modified version of it.
pub fn same_buffers_as(
    gen_spec: &'static KernelSpec,
    label: &'static str,
    wgsl: String,
    entry: &'static str,
) -> &'static KernelSpec {
    same_buffers_at(gen_spec, label, wgsl, entry, gen_spec.workgroup_size)
}

/// [`same_buffers_as`] at `workgroup_size` threads a workgroup.
fn same_buffers_at(
    gen_spec: &'static KernelSpec,
    label: &'static str,
    wgsl: String,
    entry: &'static str,
    workgroup_size: u32,
) -> &'static KernelSpec {
    let outputs: Vec<(u32, u32)> = gen_spec
        .outputs
        .iter()
        .map(|o| (o.binding, o.words))
        .collect();
    spec_shared(
        label,
        wgsl,
        entry,
        workgroup_size,
        gen_spec.input_words,
        &outputs,
        gen_spec.shared,
        no_cpu,
    )
}

/// For timing only: the generated adjoint with its workgroup sum of the shared gradient
/// cut down to one store per word (no sum, no barriers; its partial sums are wrong). Its
/// time against the whole kernel's is the in-kernel sum's share. (A kernel that streams
/// its shared gradient still writes its stage slots, without summing them.)
/// None for a kernel without that sum (a network's cooperative adjoint sums over its
/// warps, not through the reduction's stage).
pub fn without_workgroup_sum(gen_spec: &'static KernelSpec) -> Option<&'static KernelSpec> {
    if !gen_spec.wgsl.contains(&format!("fn {REDUCE_LEVELS_FN}(")) {
        return None;
    }
    let words = gen_spec.shared_words();
    let mut wgsl = cut_body(gen_spec.wgsl, REDUCE_LEVELS_FN, "");
    wgsl = cut_body(
        &wgsl,
        REDUCE_RUN_FN,
        &format!(
            "    if (lid < count) {{\n        \
             shared_partials[group * {words}u + base + lid] = reduce_stage[lid * 257u];\n    \
             }}\n"
        ),
    );
    if wgsl.contains(&format!("fn {REDUCE_STAGE_FN}(")) {
        wgsl = cut_body(&wgsl, REDUCE_STAGE_FN, "");
    }
    Some(same_buffers_as(
        gen_spec,
        "adjoint without its workgroup sum",
        wgsl,
        gen_spec.entry_point,
    ))
}

/// The adjoint `gen_spec` of the function `src` emitted with `elements` batch elements
/// side by side per thread (`emit_kernel_with_elements`), on the same buffers (one element
/// a thread's kernel, even where the generated one is a network's cooperative kernel).
pub fn with_elements(
    gen_spec: &'static KernelSpec,
    src: &str,
    elements: u32,
) -> &'static KernelSpec {
    let c = compile_str(src).expect("the bench's functions compile");
    let layout = &c.lowered.layout;
    // The generated kernel's IR (its kept loops too): only the elements differ.
    let f = gradfuse_shaders_gen::adjoint_kernel_ir(&c);
    let wgsl = gradfuse_shaders_gen::emit_wgsl::emit_kernel_with_elements(
        "fn",
        layout,
        gradfuse_shaders_gen::abi::KernelKind::Adjoint,
        &f,
        elements,
    );
    let label =
        Box::leak(format!("{} ({elements} elements per thread)", gen_spec.label).into_boxed_str());
    let size = gradfuse_shaders_gen::abi::WORKGROUP_SIZE;
    let spec = same_buffers_at(gen_spec, label, wgsl, gen_spec.entry_point, size);
    // Its shared words in the buffer the layout says (a cooperative network adjoint, the
    // spec this stands beside, reads them from storage wherever they are).
    let uniform =
        gradfuse_shaders_gen::abi::shared_in_uniform(layout.shared_words, layout.precision);
    match spec.shared {
        Some(sh) if sh.uniform != uniform => Box::leak(Box::new(KernelSpec {
            shared: Some(Box::leak(Box::new(gradfuse::SharedSpec { uniform, ..*sh }))),
            ..*spec
        })),
        _ => spec,
    }
}

/// `wgsl` with the body of WGSL function `name` replaced by `body`.
fn cut_body(wgsl: &str, name: &str, body: &str) -> String {
    let start = wgsl
        .find(&format!("fn {name}("))
        .expect("the adjoint of a function with #[shared] arguments sums its gradient");
    let open = start + wgsl[start..].find("{\n").expect("the helper has a body") + 2;
    let end = start + wgsl[start..].find("\n}\n").expect("the helper ends") + 1;
    format!("{}{body}{}", &wgsl[..open], &wgsl[end..])
}

/// `gen_spec` with its reads of shared words at a lane known when compiling
/// (`shared_args[u32(v) / 4u + q].y`) written as the division at run time they replace
/// (`shared_args[(u32(v) + w) / 4u][(u32(v) + w) % 4u]`), on the same buffers: what the
/// constant lane saves.
pub fn with_divided_lanes(gen_spec: &'static KernelSpec) -> &'static KernelSpec {
    const READ: &str = "shared_args[u32(";
    let wgsl = gen_spec.wgsl;
    let mut out = String::new();
    let mut rest = wgsl;
    while let Some(p) = rest.find(READ) {
        out.push_str(&rest[..p]);
        let tail = &rest[p + READ.len()..];
        let close = tail.find(')').expect("u32(value)");
        let value = &tail[..close];
        let after = &tail[close + 1..];
        let (q, after) = match after.strip_prefix(" / 4u + ") {
            Some(a) => {
                let end = a.find('u').expect("an element offset");
                (a[..end].parse::<u32>().expect("a number"), &a[end + 1..])
            }
            None => match after.strip_prefix(" / 4u") {
                Some(a) => (0, a),
                // A whole element a loop's quad of trips loads (`shared_args[u32(q)]`):
                // its lanes are chosen at run time already.
                None => {
                    out.push_str(&rest[p..p + READ.len() + close + 1]);
                    rest = after;
                    continue;
                }
            },
        };
        let after = after.strip_prefix("].").expect("a constant lane");
        let lane = "xyzw".find(&after[..1]).expect("a lane") as u32;
        let w = 4 * q + lane;
        let word = format!("(u32({value}) + {w}u)");
        let _ = write!(out, "shared_args[{word} / 4u][{word} % 4u]");
        rest = &after[1..];
    }
    out.push_str(rest);
    let label =
        Box::leak(format!("{} (lanes divided at run time)", gen_spec.label).into_boxed_str());
    same_buffers_as(gen_spec, label, out, gen_spec.entry_point)
}
