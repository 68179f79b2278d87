//! The items of a function with an `f32` result: `value_and_grad`, `jvp`, the WGSL
//! constants, the CPU versions the runtime falls back to, the kernel descriptions and the
//! batched launcher.

use super::ItemPlan;
use super::body::{body, body_storing, loads};
use super::launcher::{launcher, resident_launcher};
use super::spec::{fallback_items, kernel_spec};
use super::tokens::operand;
use crate::abi::KernelKind;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// `value_and_grad` (reverse mode), `jvp` (forward mode) and everything batched.
pub(super) fn scalar_api(plan: &ItemPlan) -> TokenStream {
    let c = plan.c;
    let (has_shared, has_grads) = (plan.has_shared, plan.grad_count() > 0);
    let value_and_grad = value_and_grad_fn(plan);
    let jvp = jvp_fn(plan);
    let kernels = scalar_kernels(plan);
    let float = plan.float_ty();
    let launcher = launcher(has_shared, has_grads, &float);
    let resident = resident_launcher(has_shared, has_grads, &float);
    let gathered = super::gathered::gathered_api(plan, c.wgsl_gathered.as_ref());
    quote! {
        #value_and_grad

        #jvp

        #kernels

        #launcher

        #resident

        #gathered
    }
}

/// `value_and_grad`: the value and the full gradient (and the shared gradient), by
/// reverse mode on the CPU.
fn value_and_grad_fn(plan: &ItemPlan) -> TokenStream {
    let (c, grad_count, has_shared) = (plan.c, plan.grad_count(), plan.has_shared);
    let (args_ref, shared_ref) = (quote!(args), quote!(shared));
    let float = plan.float_ty();
    let f = c.cpu.reverse.function();
    let covered = plan.covered(f, &[(1, false), (1 + grad_count, true)]);
    let adj = body_storing(f, plan.scalar(), &covered);
    let adj_loads = loads(
        f,
        &adj,
        |w| plan.access(Some(&args_ref), Some(&shared_ref), w),
        |w, n| plan.access_run(Some(&args_ref), Some(&shared_ref), w, n),
    );
    let adj_stmts = &adj.stmts;
    let adj_value = operand(
        c.cpu.reverse.function(),
        &adj.names,
        c.cpu.reverse.function().outputs[0],
        plan.scalar(),
    );
    let adj_grad = plan.grad_literal(c.cpu.reverse.function(), &adj.names, 1, false);
    let adj_shared_grad =
        plan.grad_literal(c.cpu.reverse.function(), &adj.names, 1 + grad_count, true);

    let (vg_sig, vg_ret) = if has_shared {
        (
            quote!(pub fn value_and_grad(args: &Args, shared: &Shared) -> (#float, Grad, SharedGrad)),
            quote!((#adj_value, #adj_grad, #adj_shared_grad)),
        )
    } else {
        (
            quote!(pub fn value_and_grad(args: &Args) -> (#float, Grad)),
            quote!((#adj_value, #adj_grad)),
        )
    };
    quote! {
        /// The value and the full gradient, by reverse mode on the CPU.
        #[inline]
        #vg_sig {
            #adj_loads
            #adj_stmts
            #vg_ret
        }
    }
}

/// `jvp`: the value and the directional derivative along a tangent, by forward mode.
fn jvp_fn(plan: &ItemPlan) -> TokenStream {
    let (c, layout) = (plan.c, plan.layout);
    let (grad_list, grad_count, has_shared) = (&plan.grad_list, plan.grad_count(), plan.has_shared);
    let (args_ref, shared_ref) = (quote!(args), quote!(shared));
    let float = plan.float_ty();
    // The tangent's inputs: the arguments, then one tangent word per gradient
    // word (the element's, then the shared ones).
    let tan = body(&c.cpu.tangent, plan.scalar());
    let tangent_ref = quote!(tangent);
    let shared_tangent_ref = quote!(shared_tangent);
    let n_inputs = layout.words + layout.shared_words;
    // Tangent input `w`: which struct, and which argument word.
    let tangent_word = |w: u32| {
        if w < n_inputs {
            (Some(&args_ref), Some(&shared_ref), w)
        } else if ((w - n_inputs) as usize) < grad_count {
            (Some(&tangent_ref), None, grad_list[(w - n_inputs) as usize])
        } else {
            let k = w - n_inputs - grad_count as u32;
            (None, Some(&shared_tangent_ref), layout.words + k)
        }
    };
    let tan_loads = loads(
        &c.cpu.tangent,
        &tan,
        |w| {
            let (a, s, word) = tangent_word(w);
            plan.access(a, s, word)
        },
        |w, n| {
            let (a, s, word) = tangent_word(w);
            plan.access_run(a, s, word, n)
        },
    );
    let tan_stmts = &tan.stmts;
    let tan_value = operand(
        &c.cpu.tangent,
        &tan.names,
        c.cpu.tangent.outputs[0],
        plan.scalar(),
    );
    let tan_dir = operand(
        &c.cpu.tangent,
        &tan.names,
        c.cpu.tangent.outputs[1],
        plan.scalar(),
    );

    let jvp_sig = if has_shared {
        quote!(pub fn jvp(args: &Args, shared: &Shared, tangent: &Grad, shared_tangent: &SharedGrad) -> (#float, #float))
    } else {
        quote!(pub fn jvp(args: &Args, tangent: &Grad) -> (#float, #float))
    };
    quote! {
        /// The value and the directional derivative along the tangent, by forward mode.
        #[inline]
        #jvp_sig {
            #tan_loads
            #tan_stmts
            (#tan_value, #tan_dir)
        }
    }
}

/// The WGSL modules, and the kernels' CPU versions and launch descriptions.
fn scalar_kernels(plan: &ItemPlan) -> TokenStream {
    let (c, words) = (plan.c, plan.words4());
    let (grad_count, has_shared) = (plan.grad_count(), plan.has_shared);
    let wgsl_forward = &c.wgsl_forward;
    let wgsl_adjoint = &c.wgsl_reverse;
    let eval_args = plan.eval_args();
    let fwd_spec = kernel_spec(plan, KernelKind::Forward, &format_ident!("cpu_forward"));
    let adj_spec = kernel_spec(plan, KernelKind::Adjoint, &format_ident!("cpu_adjoint"));
    let fallbacks = fallback_items(plan);
    let (float, out_view) = (plan.float_ty(), plan.out_view());
    // The CPU versions for the runtime: element words, then shared words in; value, the
    // element's gradient words, then its shared gradient words out.
    let read_shared = if has_shared {
        quote!(let s: &Shared = &::gradfuse::bytemuck::cast_slice::<f32, Shared>(&words[#words..])[0];)
    } else {
        quote!()
    };
    let call_vg = if has_shared {
        quote!(let (v, g, sg) = value_and_grad(a, s);)
    } else {
        quote!(let (v, g) = value_and_grad(a);)
    };
    let copy_grads = if grad_count > 0 {
        quote!(out[1..1 + #grad_count].copy_from_slice(::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(&g)));)
    } else {
        quote!(let _ = g;)
    };
    let copy_shared_grads = has_shared.then(|| {
        quote!(out[1 + #grad_count..].copy_from_slice(::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(&sg)));)
    });
    quote! {
        /// The WGSL module of the forward (value) kernel.
        pub const WGSL_FORWARD: &str = #wgsl_forward;
        /// The WGSL module of the adjoint (value and gradient) kernel.
        pub const WGSL_ADJOINT: &str = #wgsl_adjoint;

        fn cpu_forward(words: &[f32], out: &mut [f32]) {
            let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            #out_view
            #read_shared
            out[0] = eval::<#float>(#(#eval_args),*);
        }

        fn cpu_adjoint(words: &[f32], out: &mut [f32]) {
            let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            #out_view
            #read_shared
            #call_vg
            out[0] = v;
            #copy_grads
            #copy_shared_grads
        }

        /// The forward kernel's launch description.
        pub static FORWARD_KERNEL: ::gradfuse::KernelSpec = #fwd_spec;
        /// The adjoint kernel's launch description.
        pub static ADJOINT_KERNEL: ::gradfuse::KernelSpec = #adj_spec;
        #fallbacks
    }
}
