//! The gradfuse compiler: a restricted Rust function to an SSA IR, forward and reverse
//! automatic differentiation on that IR, optimization, and emitters for WGSL and Rust.
//!
//! Everything that is compilation lives here, testable without a proc macro; the
//! `gradfuse-macros` crate only calls [`expand`].
#![warn(missing_docs)]

pub mod abi;
pub mod ad;
pub mod compose;
pub mod cooperative;
pub mod emit_rust;
pub mod emit_wgsl;
#[cfg(feature = "testing")]
pub mod grammar;
pub mod interp;
pub mod ir;
mod kernel_choice;
pub mod launch;
pub mod lower;
pub mod names;
pub mod ops;
mod ops_f64;
pub mod opt;
#[cfg(feature = "testing")]
pub mod random;
#[cfg(feature = "testing")]
pub mod samples;
pub mod signature;

use abi::KernelKind;
use ir::Function;
use kernel_choice::{adjoint_kernel, shared_array_words, value_kernel};
use lower::Lowered;
use proc_macro2::TokenStream;
use quote::ToTokens;

/// Everything generated for one function.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The lowered function (signature, layout, unoptimized IR).
    pub lowered: Lowered,
    /// The optimized value.
    pub primal: Function,
    /// The optimized reverse mode: the gradient, or for a vector result the Jacobian.
    pub reverse: Reverse,
    /// The optimized forward mode: inputs `[args, tangent of each gradient word]`, outputs
    /// `[value, derivative]`.
    pub tangent: Function,
    /// The forward (value) kernel.
    pub wgsl_forward: String,
    /// The tangent kernel (values and directional derivatives, [`abi::KernelKind::Tangent`]),
    /// over [`abi::ArgLayout::tangent_layout`].
    pub wgsl_tangent: String,
    /// The reverse kernel: adjoint (value and gradient) or Jacobian (values and Jacobian).
    pub wgsl_reverse: String,
    /// The gathered variants of the forward and reverse kernels, each per-element argument
    /// read from a buffer of its own, directly or through an index (functions with 1 to
    /// [`abi::MAX_GATHERED_FIELDS`] per-element arguments).
    pub wgsl_gathered: Option<GatheredWgsl>,
    /// The second pass of the shared-gradient reduction (functions with `#[shared]`
    /// arguments).
    pub wgsl_reduce: Option<String>,
    /// Batch elements each thread of the adjoint kernel computes side by side
    /// ([`emit_wgsl::elements_per_thread`]; 1 for a kernel that sums no shared gradient).
    pub adjoint_elements: u32,
    /// How the forward (value) kernel is compiled and bound: one element a thread, or the
    /// cooperative network value kernel's form ([`emit_wgsl::emit_network_value`]).
    pub forward_form: launch::KernelForm,
    /// How the adjoint kernel is compiled and bound: one element a thread, or the
    /// cooperative network adjoint's form ([`emit_wgsl::emit_network_adjoint`]).
    pub adjoint_form: launch::KernelForm,
    /// Where the value kernel is the cooperative network kernel: the value kernel of one
    /// element a thread, launched as [`launch::per_element_launch`] says, for devices with
    /// less workgroup memory than its form's [`launch::KernelForm::workgroup_bytes`].
    pub forward_fallback: Option<String>,
    /// The same for the adjoint kernel.
    pub adjoint_fallback: Option<String>,
    /// The IR of the CPU versions.
    pub cpu: CpuIr,
    /// Second order, for an `f32` result with gradient words.
    pub second: Option<SecondOrder>,
}

/// The kernel adjoint that `derive` makes of `lowered` unrolled with its long-taped loops
/// recomputed a segment at a time from checkpoints ([`opt::recompute`]), where `lowered`
/// has such loops and no other, and where its code stays within twice that of `unrolled`
/// (the adjoint of the kernels' fully unrolled primal); else `unrolled`.
fn recomputing(
    lowered: &Function,
    unrolled: Function,
    derive: impl Fn(&Function) -> Function,
) -> Function {
    let Some(kept) = opt::recompute::keeping_long_tapes(lowered) else {
        return unrolled;
    };
    let recomputed = opt::optimize(&opt::recompute::unroll_loops(&derive(&kept)));
    if recomputed.code_size() <= 2 * unrolled.code_size() {
        recomputed
    } else {
        unrolled
    }
}

/// The second-order versions of a function with an `f32` result, in the element's
/// gradient words (`#[shared]` words are inputs, held fixed: no Hessian block in them).
#[derive(Clone, Debug)]
pub struct SecondOrder {
    /// The CPU Hessian-vector product: inputs `[element words, shared words, one word of
    /// `v` per gradient word]`, outputs `H v`.
    pub cpu_hvp: Function,
    /// The Hessian, for functions with at most [`MAX_HESSIAN_WORDS`] gradient words.
    pub hessian: Option<HessianKernel>,
}

/// A function's whole Hessian: on the GPU from [`HessianKernel::wgsl`], on the CPU as the
/// rows of [`SecondOrder::cpu_hvp`].
#[derive(Clone, Debug)]
pub struct HessianKernel {
    /// The kernel's IR: outputs `[value, gradient words..., Hessian words (row-major)...]`.
    pub function: Function,
    /// How it lays out its sweeps.
    pub form: ad::HessianForm,
    /// Its WGSL ([`abi::KernelKind::Hessian`]).
    pub wgsl: String,
}

/// The WGSL of a function's gathered kernels ([`emit_wgsl::emit_gathered_kernel`]).
#[derive(Clone, Debug)]
pub struct GatheredWgsl {
    /// The forward (value) kernel.
    pub forward: String,
    /// The adjoint (value and gradient) kernel, or for a vector result the Jacobian
    /// kernel.
    pub reverse: String,
}

/// The IR the CPU versions are written from: the same passes as the kernels' on the
/// user's own loops, none unrolled. Unrolling is a kernel decision (registers instead of
/// function memory on the GPU); in Rust, LLVM unrolls where it pays, and rustc's debug
/// builds crash on functions of a few thousand `let`s (LLVM's debug info nests a scope per
/// binding), which unrolled reverse passes reach.
#[derive(Clone, Debug)]
pub struct CpuIr {
    /// The optimized value.
    pub primal: Function,
    /// The optimized reverse mode.
    pub reverse: Reverse,
    /// The optimized forward mode.
    pub tangent: Function,
}

/// What the reverse pass of a function computes, by its result's type.
#[derive(Clone, Debug)]
pub enum Reverse {
    /// An `f32` result: outputs `[value, gradient words..., shared gradient words...]`
    /// (the gradient words of [`abi::ArgLayout::grad_words`]).
    Gradient(Function),
    /// An `[f32; M]` or tuple result: outputs `[values (M), rows (M x gradient words)...]`,
    /// row `k` the gradient of result word `k`, computed as the mode says.
    Jacobian(Function, ad::JacobianMode),
}

impl Compiled {
    /// Kernel `kind`'s fallback of one element a thread, where it has one
    /// ([`Compiled::forward_fallback`], [`Compiled::adjoint_fallback`]).
    pub fn fallback(&self, kind: KernelKind) -> Option<&str> {
        match kind {
            KernelKind::Forward => self.forward_fallback.as_deref(),
            KernelKind::Adjoint => self.adjoint_fallback.as_deref(),
            _ => None,
        }
    }
}

impl Reverse {
    /// The IR of the reverse pass.
    pub fn function(&self) -> &Function {
        match self {
            Reverse::Gradient(f) | Reverse::Jacobian(f, _) => f,
        }
    }

    /// How the Jacobian is computed, for a vector result.
    pub fn jacobian_mode(&self) -> Option<ad::JacobianMode> {
        match self {
            Reverse::Gradient(_) => None,
            Reverse::Jacobian(_, mode) => Some(*mode),
        }
    }
}

/// The signature as written, for comments in generated code.
fn signature_text(item: &syn::ItemFn) -> String {
    let sig = &item.sig;
    let s = sig.to_token_stream().to_string();
    // The printer may break long token lists over lines; the header is one comment line.
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    // Token printing spaces every token; tighten the common cases for the header.
    s.replace(" :", ":")
        .replace(" ,", ",")
        .replace(" (", "(")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace("[ ", "[")
        .replace(" ]", "]")
        .replace(" ;", ";")
}

/// Most operations a function may have once lowered, loop bodies counted once and calls
/// inlined (a straight-line body of some 1,500 statements). Measured on our 2-core machine,
/// a straight-line function of 4,800 operations builds in release in 7 s (300 MB of rustc),
/// one of 9,800 in 92 s (730 MB): past the bound, rustc's time on the generated versions
/// grows faster than their size.
pub const MAX_OPERATIONS: usize = 6_000;

/// Most gradient words a function may have for a whole Hessian: one of 64 x 64 words is
/// 16 KiB per element, and its kernel sweeps 64 times. Past it, a function has `hvp` but no
/// `value_grad_hessian`.
pub const MAX_HESSIAN_WORDS: usize = 64;

/// Most operations (adjoint size times directions) for which the Hessian kernel is
/// straight-line sweeps sharing the primal ([`ad::HessianForm::Sweeps`]); past it, one
/// sweep in a loop over the directions ([`ad::HessianForm::Loop`]), code the size of one.
pub const HESSIAN_SWEEPS_BUDGET: usize = 8_192;

/// Compiles a function: lowering, AD, optimization and WGSL emission.
pub fn compile(item: &syn::ItemFn) -> Result<Compiled, Vec<syn::Error>> {
    compile_with(item, &[])
}

/// [`compile`] with the sources of the differentiable functions `item` calls.
pub fn compile_with(
    item: &syn::ItemFn,
    library: &[syn::ItemFn],
) -> Result<Compiled, Vec<syn::Error>> {
    let lowered = lower::lower_fn_with(item, library)?;
    let primal = opt::unroll_indexed_loops(&lowered.primal);
    let size = primal.code_size();
    if size > MAX_OPERATIONS {
        return Err(vec![syn::Error::new(
            item.sig.ident.span(),
            format!(
                "this function is {size} operations once lowered (calls inlined), past the \
                 limit of {MAX_OPERATIONS}: its generated versions would cost rustc minutes \
                 and much memory. Repeated work belongs in a `for` loop, which stays a loop"
            ),
        )]);
    }
    let cpu_primal = opt::optimize(&lowered.primal);
    let sig = signature_text(item);
    let layout = &lowered.layout;
    if layout.results > 1 || matches!(lowered.sig.result, signature::Shape::Array(_)) {
        return Ok(compile_vector(lowered, primal, cpu_primal, &sig));
    }
    let (adjoint, tangent) = derive_scalar(layout, &primal, Tapes::Checkpointed);
    let (cpu_adjoint, cpu_tangent) = derive_scalar(layout, &cpu_primal, Tapes::Whole);
    // The kernel that sums shared gradients over the batch takes the adjoint's seed as an
    // input (1 in the batch, 0 past its end) rather than the constant 1: threads past the
    // end then add zero to the sums without a select per shared word, and each sum of a
    // product fuses into one FMA.
    let kernel_adjoint = if layout.shared_words > 0 {
        shared_adjoint_kernel(layout, &lowered.primal, &primal)
    } else {
        recomputing(&lowered.primal, adjoint.clone(), |p| {
            reverse_of(layout, p, Tapes::Checkpointed)
        })
    };
    let (forward, value_primal) = value_kernel(&sig, layout, &lowered.primal, &primal);
    let adjoint_elements =
        emit_wgsl::elements_per_thread(layout, KernelKind::Adjoint, &kernel_adjoint);
    let reverse = adjoint_kernel(
        &sig,
        layout,
        &lowered.primal,
        &kernel_adjoint,
        adjoint_elements,
    );
    let wgsl_tangent = tangent_kernel(&sig, layout, &tangent);
    let wgsl_reduce = (layout.shared_words > 0)
        .then(|| emit_wgsl::emit_reduce_kernel(&sig, layout.shared_words, layout.precision));
    let second = second_order(&sig, layout, (&primal, &adjoint), &cpu_primal);
    let wgsl_gathered = layout.has_gathered_kernel().then(|| GatheredWgsl {
        forward: emit_wgsl::emit_gathered_kernel(&sig, layout, KernelKind::Forward, &value_primal),
        reverse: emit_wgsl::emit_gathered_kernel(
            &sig,
            layout,
            KernelKind::Adjoint,
            &kernel_adjoint,
        ),
    });
    Ok(Compiled {
        adjoint_elements,
        forward_form: forward.form,
        adjoint_form: reverse.form,
        forward_fallback: forward.fallback,
        adjoint_fallback: reverse.fallback,
        wgsl_reduce,
        wgsl_gathered,
        second,
        cpu: CpuIr {
            primal: cpu_primal,
            reverse: Reverse::Gradient(cpu_adjoint),
            tangent: cpu_tangent,
        },
        lowered,
        primal,
        reverse: Reverse::Gradient(adjoint),
        tangent,
        wgsl_forward: forward.wgsl,
        wgsl_tangent,
        wgsl_reverse: reverse.wgsl,
    })
}

/// Fewest words of `#[shared]` arrays a top-level loop reads for the adjoint kernel to keep
/// it as a loop (below, streaming its rows word by word costs little).
const MIN_KEPT_SHARED_WORDS: usize = 64;

/// The IR of the adjoint kernel of a function with `#[shared]` arguments: the seeded
/// adjoint of the kernels' `primal`, or of `lowered` with its top-level loops that read
/// shared arrays kept as loops where each of those then sums its rows of the shared
/// gradient as outer products ([`emit_wgsl::outer_summed_loops`]), for a gradient
/// streamed through the workgroup ([`emit_wgsl::streams_shared_gradient`]). Unrolled, a layer's
/// every weight's gradient is a word of its own, streamed through the workgroup's sum one
/// by one; kept, its rows cross the workgroup as one factor per row and one column per
/// element. On the H100 at 2^20 an 8-32-32-1 network's `value_and_grad` took 1.98 ms
/// with its first layer unrolled, 1.34 ms kept (BENCHMARKS.md). The other kernels keep
/// the budget's unrolling: their values stay in registers.
fn shared_adjoint_kernel(
    layout: &abi::ArgLayout,
    lowered: &Function,
    primal: &Function,
) -> Function {
    let unrolled = recomputing(lowered, seeded_adjoint(layout, primal), |p| {
        seeded_adjoint(layout, p)
    });
    // A gradient summed per thread in registers needs no help (and computes several
    // elements per thread, which a kept loop's outer sums do not).
    if !emit_wgsl::streams_shared_gradient(layout, &unrolled) {
        return unrolled;
    }
    let summed = |f: &Function| emit_wgsl::outer_summed_loops(layout, f);
    let reads_shared =
        |f: &Function, l: &ir::Loop| shared_array_words(layout, f, l) >= MIN_KEPT_SHARED_WORDS;
    // The adjoint with the candidates (loops `reads_shared` picks, numbered in the order
    // the unroller meets them) for which `kept` holds kept as loops, and how many
    // candidates there are.
    let keeping = |kept: &dyn Fn(usize) -> bool| {
        let seen = std::cell::Cell::new(0);
        let keep = |f: &Function, l: &ir::Loop| {
            reads_shared(f, l) && {
                seen.set(seen.get() + 1);
                kept(seen.get() - 1)
            }
        };
        let kept_primal = opt::unroll_indexed_loops_keeping(lowered, &keep);
        (seeded_adjoint(layout, &kept_primal), seen.get())
    };
    let (every, candidates) = keeping(&|_| true);
    if candidates == 0 {
        return unrolled;
    }
    let base = summed(&unrolled);
    if summed(&every) >= base + candidates {
        return every;
    }
    // Some candidate's rows are not summed as outer products (an output layer's single
    // row, say): keep each of the others that is, one at a time. A 4-64-64-1 network's
    // first layer was streamed word by word because its output layer could not be summed.
    let mut chosen: Vec<usize> = Vec::new();
    let mut best = (unrolled, base);
    for candidate in 0..candidates {
        let (trial, _) = keeping(&|k| k == candidate || chosen.contains(&k));
        let (trial_summed, kept) = (summed(&trial), chosen.len() + 1);
        if trial_summed > best.1 && trial_summed >= base + kept {
            chosen.push(candidate);
            best = (trial, trial_summed);
        }
    }
    best.0
}

/// The second-order versions of a function with an `f32` result: the Hessian kernel from
/// the kernels' primal (straight-line sweeps when `adjoint`'s size times the directions is
/// within [`HESSIAN_SWEEPS_BUDGET`], else a loop), the CPU Hessian-vector product from the
/// CPU versions' primal.
fn second_order(
    sig: &str,
    layout: &abi::ArgLayout,
    (primal, adjoint): (&Function, &Function),
    cpu_primal: &Function,
) -> Option<SecondOrder> {
    let wrt = layout.grad_words();
    if wrt.is_empty() {
        return None;
    }
    let hessian = (wrt.len() <= MAX_HESSIAN_WORDS).then(|| {
        let form = if adjoint.code_size() * wrt.len() <= HESSIAN_SWEEPS_BUDGET {
            ad::HessianForm::Sweeps
        } else {
            ad::HessianForm::Loop
        };
        let function = opt::optimize(&ad::hessian(
            &Tapes::Checkpointed.prepare(primal),
            &wrt,
            form,
        ));
        let wgsl = emit_wgsl::emit_kernel(sig, layout, KernelKind::Hessian, &function);
        HessianKernel {
            function,
            form,
            wgsl,
        }
    });
    Some(SecondOrder {
        cpu_hvp: opt::optimize(&ad::hvp(cpu_primal, &wrt)),
        hessian,
    })
}

/// The tangent kernel's WGSL: `tangent` (inputs: the element's words, the shared words, the
/// element's tangent, the shared tangent) with its inputs in the order of
/// [`abi::ArgLayout::tangent_layout`] (the element's words and tangent, then the shared
/// words and tangent), so that the kernel reads an element's tangent as more argument words.
fn tangent_kernel(sig: &str, layout: &abi::ArgLayout, tangent: &Function) -> String {
    let (words, shared, grads) = (
        layout.words,
        layout.shared_words,
        layout.grad_words().len() as u32,
    );
    let tangent_layout = layout.tangent_layout();
    let mut f = tangent.clone();
    for node in &mut f.nodes {
        if let ir::Op::Input(w) = &mut node.op {
            let moved = if *w < words {
                *w
            } else if *w < words + shared {
                *w + grads
            } else if *w < words + shared + grads {
                *w - shared
            } else {
                *w
            };
            node.name = Some(tangent_layout.word_name(moved));
            *w = moved;
        }
    }
    emit_wgsl::emit_kernel(sig, &tangent_layout, KernelKind::Tangent, &f)
}

/// The rest of [`compile_with`] for a function with an `[f32; M]` or tuple result: its
/// Jacobian instead of a gradient, and no shared arguments.
fn compile_vector(lowered: Lowered, primal: Function, cpu_primal: Function, sig: &str) -> Compiled {
    let layout = &lowered.layout;
    let (jacobian, tangent) = derive_vector(layout, &primal, Tapes::Checkpointed);
    let (cpu_reverse, cpu_tangent) = derive_vector(layout, &cpu_primal, Tapes::Whole);
    let value_primal = opt::for_value_kernel(&primal);
    let wgsl_forward = emit_wgsl::emit_kernel(sig, layout, KernelKind::Forward, &value_primal);
    let wgsl_reverse =
        emit_wgsl::emit_kernel(sig, layout, KernelKind::Jacobian, jacobian.function());
    let wgsl_tangent = tangent_kernel(sig, layout, &tangent);
    let wgsl_gathered = layout.has_gathered_kernel().then(|| GatheredWgsl {
        forward: emit_wgsl::emit_gathered_kernel(sig, layout, KernelKind::Forward, &value_primal),
        reverse: emit_wgsl::emit_gathered_kernel(
            sig,
            layout,
            KernelKind::Jacobian,
            jacobian.function(),
        ),
    });
    Compiled {
        adjoint_elements: 1,
        forward_form: launch::KernelForm::PER_ELEMENT,
        adjoint_form: launch::KernelForm::PER_ELEMENT,
        forward_fallback: None,
        adjoint_fallback: None,
        wgsl_reduce: None,
        wgsl_gathered,
        second: None,
        cpu: CpuIr {
            primal: cpu_primal,
            reverse: cpu_reverse,
            tangent: cpu_tangent,
        },
        lowered,
        primal,
        reverse: jacobian,
        tangent,
        wgsl_forward,
        wgsl_tangent,
        wgsl_reverse,
    }
}

/// The outputs of a reverse pass a function with an `f32` result keeps: the value, the
/// element's gradient words, the shared gradient words (`#[constant]` words' are dropped,
/// and their computation pruned by the optimizer).
fn kept_gradient_outputs(layout: &abi::ArgLayout, mut f: Function) -> Function {
    let shared_inputs = layout.words..layout.words + layout.shared_words;
    f.outputs = std::iter::once(f.outputs[0])
        .chain(
            layout
                .grad_words()
                .into_iter()
                .chain(shared_inputs)
                .map(|w| f.outputs[1 + w as usize]),
        )
        .collect();
    opt::optimize(&f)
}

/// How a reverse pass keeps the tapes of its loops.
#[derive(Clone, Copy)]
enum Tapes {
    /// Every iteration recorded: the CPU versions, whose tapes are on the heap.
    Whole,
    /// Long loops cut into segments, each run again from its checkpoint
    /// ([`opt::checkpoint_long_loops`]): the kernels, whose tapes are each thread's local
    /// memory.
    Checkpointed,
}

impl Tapes {
    /// The function to derive a reverse pass from.
    fn prepare(self, primal: &Function) -> std::borrow::Cow<'_, Function> {
        match self {
            Tapes::Whole => std::borrow::Cow::Borrowed(primal),
            Tapes::Checkpointed => std::borrow::Cow::Owned(opt::checkpoint_long_loops(primal)),
        }
    }
}

/// The optimized adjoint of a function with an `f32` result, its tapes kept as `tapes` says.
fn reverse_of(layout: &abi::ArgLayout, primal: &Function, tapes: Tapes) -> Function {
    kept_gradient_outputs(layout, ad::reverse(&tapes.prepare(primal)))
}

/// The optimized adjoint and tangent of a function with an `f32` result.
fn derive_scalar(layout: &abi::ArgLayout, primal: &Function, tapes: Tapes) -> (Function, Function) {
    let adjoint = reverse_of(layout, primal, tapes);
    let active: Vec<bool> = (0..layout.words + layout.shared_words)
        .map(|w| layout.is_differentiable(w))
        .collect();
    let tangent = opt::optimize(&ad::forward_active(primal, &active));
    (adjoint, tangent)
}

/// The optimized Jacobian and tangent of a function with an `[f32; M]` or tuple result.
fn derive_vector(layout: &abi::ArgLayout, primal: &Function, tapes: Tapes) -> (Reverse, Function) {
    let (jac, mode) = ad::jacobian(&tapes.prepare(primal), &layout.grad_words());
    let active: Vec<bool> = (0..layout.words)
        .map(|w| layout.is_differentiable(w))
        .collect();
    let tangent = opt::optimize(&ad::forward_active(primal, &active));
    let jac = opt::optimize(&jac);
    let jac = match mode {
        // One reverse sweep per result: each result's primal and sweep together.
        ad::JacobianMode::Reverse => {
            let (m, row) = (primal.outputs.len(), layout.grad_words().len());
            let groups: Vec<Vec<usize>> = (0..m)
                .map(|k| {
                    std::iter::once(k)
                        .chain(m + k * row..m + (k + 1) * row)
                        .collect()
                })
                .collect();
            opt::outputs_in_groups(&jac, &groups)
        }
        ad::JacobianMode::Forward => jac,
    };
    (Reverse::Jacobian(jac, mode), tangent)
}

/// The function as rustc should see it: `#[constant]` on an argument is gradfuse's, and
/// means nothing to rustc.
fn without_argument_attributes(mut func: syn::ItemFn) -> syn::ItemFn {
    func.attrs.retain(|a| !a.path().is_ident("gradfuse_grad"));
    for arg in &mut func.sig.inputs {
        if let syn::FnArg::Typed(pt) = arg {
            pt.attrs
                .retain(|a| !a.path().is_ident("constant") && !a.path().is_ident("shared"));
        }
    }
    func
}

/// `grad = path`.
struct CustomGradAttr(syn::Path);

impl syn::parse::Parse for CustomGradAttr {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        let key: syn::Ident = input.parse()?;
        if key != "grad" {
            return Err(syn::Error::new(key.span(), "expected `grad = ...`"));
        }
        input.parse::<syn::Token![=]>()?;
        let path = input.parse()?;
        if !input.is_empty() {
            return Err(input.error("expected nothing after the path"));
        }
        Ok(CustomGradAttr(path))
    }
}

/// Compiles a function given as source text (for tests, benches and tools).
pub fn compile_str(src: &str) -> Result<Compiled, Vec<syn::Error>> {
    let item: syn::ItemFn = syn::parse_str(src).map_err(|e| vec![e])?;
    compile(&item)
}

/// The IR the adjoint kernel of `c` runs, for a function with `#[shared]` arguments: its
/// seeded reverse pass, with the layer loops it keeps for their outer products (for
/// benches that emit the kernel again with other settings).
pub fn adjoint_kernel_ir(c: &Compiled) -> Function {
    shared_adjoint_kernel(&c.lowered.layout, &c.lowered.primal, &c.primal)
}

/// The IR of the adjoint kernel that sums shared gradients over the batch, of `primal`
/// (the kernels' optimized value) with layout `layout`: the reverse pass with its seed as
/// one more input, past the shared words.
pub fn seeded_adjoint(layout: &abi::ArgLayout, primal: &Function) -> Function {
    let mut seeded = ad::vjp(&Tapes::Checkpointed.prepare(primal), &[]);
    let seed = layout.words + layout.shared_words;
    for node in &mut seeded.nodes {
        if matches!(node.op, ir::Op::Input(w) if w == seed) {
            node.name = Some("seed".into());
        }
    }
    kept_gradient_outputs(layout, seeded)
}

/// The expansion of `#[differentiable]`: the function unchanged plus its generated module,
/// or the function unchanged plus every compile error found in it.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let msg = syn::Error::new(
                e.span(),
                "#[differentiable] applies to a free function (`fn f(x: f32) -> f32 { ... }`)",
            );
            let mut out = item;
            out.extend(msg.to_compile_error());
            return out;
        }
    };
    // `grad = path`: a custom derivative, kept on the function as a marker attribute so
    // that it travels with the source to callers.
    let mut attr = attr;
    if !attr.is_empty() {
        match syn::parse2::<CustomGradAttr>(attr.clone()) {
            Ok(CustomGradAttr(path)) => {
                func.attrs.push(syn::parse_quote!(#[gradfuse_grad(#path)]));
                attr = TokenStream::new();
            }
            Err(e) => {
                let mut out = without_argument_attributes(func).to_token_stream();
                out.extend(
                    syn::Error::new(
                        e.span(),
                        "#[differentiable] takes nothing, or `grad = f_grad`: a \
                         #[differentiable] function giving this one's derivative",
                    )
                    .to_compile_error(),
                );
                return out;
            }
        }
    }
    // The source, for the functions that call this one; then the calls this one makes:
    // ask each callee for its source first.
    let mut out = compose::source_module(&func);
    let uncallable = compose::uncallable(&func);
    if !uncallable.is_empty() {
        out.extend(quote::quote!(#[allow(unused_variables)]));
        out.extend(without_argument_attributes(func).to_token_stream());
        for e in uncallable {
            out.extend(e.to_compile_error());
        }
        return out;
    }
    let mut pending = compose::missing(&func, &[]);
    if !pending.is_empty() {
        let next = pending.remove(0);
        let state = compose::State {
            sources: Vec::new(),
            in_flight: None,
            pending,
            attr,
            item: func,
        };
        out.extend(compose::callback(&next, &state));
        return out;
    }
    out.extend(expand_item(attr, func, Vec::new()));
    out
}

/// The expansion of a function whose callees' sources are all in `library`.
pub(crate) fn expand_item(
    attr: TokenStream,
    func: syn::ItemFn,
    library: Vec<syn::ItemFn>,
) -> TokenStream {
    let mut errors = Vec::new();
    if !attr.is_empty() {
        errors.push(syn::Error::new_spanned(
            &attr,
            "#[differentiable] takes no arguments yet",
        ));
    }
    let compiled = compile_with(&func, &library);
    let func = without_argument_attributes(func);
    match compiled {
        Ok(c) if errors.is_empty() => emit_rust::emit(&func, &c),
        result => {
            if let Err(errs) = result {
                errors.extend(errs);
            }
            // The function itself still compiles, so that its callers do not add errors of
            // their own; its unused-variable warnings would only be noise next to ours.
            let mut out = quote::quote!(#[allow(unused_variables)]);
            out.extend(func.to_token_stream());
            for e in errors {
                out.extend(e.to_compile_error());
            }
            out
        }
    }
}
