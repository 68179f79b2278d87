//! The tokens every part of a CPU version is written with: literals, names and operands,
//! over `f32` or a generic `S: gradfuse::Real`.

use crate::ir::{Function, Op, ValueId};
use crate::signature::Precision;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// Whether code is emitted for `f32`, `f64` or a generic `S: gradfuse::Real`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scalar {
    F32,
    F64,
    Generic,
}

impl Scalar {
    /// The concrete type of a function of `precision`.
    pub(super) fn of(precision: Precision) -> Scalar {
        match precision {
            Precision::F32 => Scalar::F32,
            Precision::F64 => Scalar::F64,
        }
    }
}

/// The Rust float type of `precision`.
pub(super) fn float_ty(precision: Precision) -> TokenStream {
    match precision {
        Precision::F32 => quote!(f32),
        Precision::F64 => quote!(f64),
    }
}

/// The runtime's `Precision` value of `precision`.
pub(super) fn precision_value(precision: Precision) -> TokenStream {
    match precision {
        Precision::F32 => quote!(::gradfuse::Precision::F32),
        Precision::F64 => quote!(::gradfuse::Precision::F64),
    }
}

/// `impl gradfuse::Floats for #ty` in `precision` (a generated type of floats only).
pub(super) fn floats_impl(ty: &str, precision: Precision) -> TokenStream {
    let (ty, p) = (ident(ty), precision_value(precision));
    quote! {
        impl ::gradfuse::Floats for #ty {
            const PRECISION: ::gradfuse::Precision = #p;
        }
    }
}

/// `v` as a literal of the emitted code's type: rounded to f32 for f32 code, exact for f64,
/// through `Real::from_f64` for generic code.
pub(super) fn literal(v: f64, scalar: Scalar) -> TokenStream {
    match scalar {
        Scalar::F32 | Scalar::F64 => {
            let (x, ty) = if scalar == Scalar::F32 {
                (v as f32 as f64, quote!(f32))
            } else {
                (v, quote!(f64))
            };
            if x.is_nan() {
                quote!(#ty::NAN)
            } else if x.is_infinite() && x > 0.0 {
                quote!(#ty::INFINITY)
            } else if x.is_infinite() {
                quote!(#ty::NEG_INFINITY)
            } else {
                let lit = if scalar == Scalar::F32 {
                    proc_macro2::Literal::f32_suffixed(x.abs() as f32)
                } else {
                    proc_macro2::Literal::f64_suffixed(x.abs())
                };
                if x.is_sign_negative() {
                    quote!((-#lit))
                } else {
                    quote!(#lit)
                }
            }
        }
        Scalar::Generic => {
            if v.is_nan() {
                quote!(<S as ::gradfuse::Real>::from_f64(f64::NAN))
            } else if v.is_infinite() {
                if v > 0.0 {
                    quote!(<S as ::gradfuse::Real>::from_f64(f64::INFINITY))
                } else {
                    quote!(<S as ::gradfuse::Real>::from_f64(f64::NEG_INFINITY))
                }
            } else {
                let lit = proc_macro2::Literal::f64_suffixed(v.abs());
                if v.is_sign_negative() {
                    quote!(<S as ::gradfuse::Real>::from_f64(-#lit))
                } else {
                    quote!(<S as ::gradfuse::Real>::from_f64(#lit))
                }
            }
        }
    }
}

/// The identifier `name` (a raw identifier, `r#type`, as written: `Ident::new` refuses it).
pub(super) fn ident(name: &str) -> syn::Ident {
    match name.strip_prefix("r#") {
        Some(raw) => syn::Ident::new_raw(raw, proc_macro2::Span::call_site()),
        None => format_ident!("{}", name),
    }
}

pub(super) fn operand(f: &Function, names: &[String], v: ValueId, scalar: Scalar) -> TokenStream {
    match f.node(v).op {
        Op::Const(c) => literal(c, scalar),
        Op::Int(k) => {
            let k = proc_macro2::Literal::i32_suffixed(k as i32);
            quote!(#k)
        }
        _ => {
            let id = ident(&names[v.index()]);
            quote!(#id)
        }
    }
}
