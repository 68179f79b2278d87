//! The `#[differentiable]` attribute. All compilation happens in `gradfuse-shaders-gen`;
//! this crate only moves tokens across the proc-macro boundary.

use proc_macro::TokenStream;

/// Turns a restricted Rust function into its plain, generic (`eval`), reverse
/// (`value_and_grad`) and forward (`jvp`) CPU versions, WGSL kernels and a typed batched
/// launcher, all in a module named after the function. See the `gradfuse` crate docs.
#[proc_macro_attribute]
pub fn differentiable(attr: TokenStream, item: TokenStream) -> TokenStream {
    gradfuse_shaders_gen::expand(attr.into(), item.into()).into()
}

/// Not for direct use: the continuation through which `#[differentiable]` collects the
/// sources of the differentiable functions a function calls (see `gradfuse-shaders-gen`'s
/// `compose` module).
#[doc(hidden)]
#[proc_macro]
pub fn __differentiable_with(input: TokenStream) -> TokenStream {
    gradfuse_shaders_gen::compose::expand_with(input.into()).into()
}
