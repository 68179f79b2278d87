//! The signature: parameter and result types, `#[constant]` and `#[shared]`.

use super::*;

/// The signature, with every problem in it reported.
pub(super) fn lower_signature(sig: &syn::Signature, diag: &mut Diagnostics) -> Signature {
    check_qualifiers(sig, diag);
    let mut params = Vec::new();
    for arg in &sig.inputs {
        match arg {
            syn::FnArg::Receiver(r) => diag.error(
                r.span(),
                "a differentiable function cannot take `self`: write a free function",
            ),
            syn::FnArg::Typed(pt) => params.extend(lower_param(pt, diag)),
        }
    }
    for (k, p) in params.iter().enumerate() {
        if params[..k].iter().any(|q| q.name == p.name) {
            // rustc says so too, but after the kernels were generated from it: each
            // argument's buffers are named after it, and a second one redefines them.
            diag.error(
                p.name.span(),
                format!("`{}` is bound twice in the parameter list", p.name),
            );
        }
    }
    if !params.is_empty() && params.iter().all(|p| p.constant) {
        diag.error(
            sig.inputs.span(),
            "every argument is `#[constant]`: there is nothing to differentiate",
        );
    }
    if !params.is_empty() && params.iter().all(|p| p.shared) {
        diag.error(
            sig.inputs.span(),
            "every argument is `#[shared]`: a batch needs at least one per-element argument",
        );
    }
    let (result, result_parts) = lower_result(sig, diag);
    if let (Shape::Array(_), Some(p)) = (result, params.iter().find(|p| p.shared)) {
        diag.error(
            p.name.span(),
            "`#[shared]` arguments need an `f32` result (their gradient is that of the sum \
             over the batch); with an array result, pass them per element",
        );
    }
    Signature {
        result,
        result_parts,
        name: sig.ident.clone(),
        vis: syn::Visibility::Inherited,
        params,
        precision: Default::default(),
    }
}

/// `const`, `async`, `unsafe`, `extern`, generics and variadics: none has a meaning here.
fn check_qualifiers(sig: &syn::Signature, diag: &mut Diagnostics) {
    if let Some(t) = &sig.constness {
        diag.error(t.span, "a differentiable function cannot be `const`");
    }
    if let Some(t) = &sig.asyncness {
        diag.error(t.span, "a differentiable function cannot be `async`");
    }
    if let syn::Safety::Unsafe(t) = &sig.safety {
        diag.error(t.span, "a differentiable function cannot be `unsafe`");
    }
    if let Some(abi) = &sig.abi {
        diag.error(
            abi.span(),
            "a differentiable function cannot have an `extern` ABI",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        diag.error(
            sig.generics.span(),
            "a differentiable function cannot be generic: write it for f32; \
             `f::eval` is the generic version gradfuse generates",
        );
    }
    if let Some(v) = &sig.variadic {
        diag.error(v.span(), "variadic arguments are not supported");
    }
}

/// One typed parameter; `None` (reported) when its pattern or type is not supported.
fn lower_param(pt: &syn::PatType, diag: &mut Diagnostics) -> Option<Param> {
    let (constant, shared) = argument_roles(pt, diag);
    let mut mutable = false;
    let name = match &*pt.pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            mutable = pi.mutability.is_some();
            Some(pi.ident.clone())
        }
        other => {
            diag.error(
                other.span(),
                "argument patterns are not supported: name the argument \
                 (`x: f32`)",
            );
            None
        }
    };
    let kind = diag.report(param_type(&pt.ty));
    Some(Param {
        name: name?,
        kind: kind?,
        mutable,
        constant,
        shared,
    })
}

/// Whether an argument is `#[constant]` and whether it is `#[shared]`.
fn argument_roles(pt: &syn::PatType, diag: &mut Diagnostics) -> (bool, bool) {
    let (mut constant, mut shared) = (false, false);
    for a in &pt.attrs {
        let path = a.path();
        let flag = if path.is_ident("constant") {
            Some(("constant", &mut constant))
        } else if path.is_ident("shared") {
            Some(("shared", &mut shared))
        } else {
            None
        };
        if let Some((name, set)) = flag {
            if !matches!(a.meta, syn::Meta::Path(_)) {
                diag.error(a.span(), format!("`#[{name}]` takes no arguments"));
            } else if *set {
                diag.error(a.span(), format!("`#[{name}]` is given twice"));
            }
            *set = true;
        } else if ["allow", "warn", "deny", "forbid", "expect"]
            .iter()
            .any(|lint| path.is_ident(lint))
        {
            // Lint levels mean nothing to gradfuse; rustc sees them.
        } else {
            diag.error(
                a.span(),
                "unsupported argument attribute: an argument may be marked \
                 `#[constant]` (per-element data without a gradient) or \
                 `#[shared]` (one value for the whole batch, its gradient summed)",
            );
        }
    }
    if constant
        && shared
        && let Some(a) = pt.attrs.iter().find(|a| a.path().is_ident("shared"))
    {
        diag.error(
            a.span(),
            "an argument cannot be both `#[shared]` and `#[constant]` yet: a \
             shared argument has a gradient (summed over the batch)",
        );
    }
    (constant, shared)
}

/// The result's shape, and the parts of a tuple result.
fn lower_result(sig: &syn::Signature, diag: &mut Diagnostics) -> (Shape, Option<Vec<Shape>>) {
    let mut result = Shape::Scalar;
    let mut result_parts = None;
    match &sig.output {
        syn::ReturnType::Default => diag.error(
            sig.ident.span(),
            "a differentiable function must return `f32`: add `-> f32`",
        ),
        syn::ReturnType::Type(_, ty) if tuple_parts(ty).is_some() => {
            let parts = tuple_parts(ty).unwrap_or_default();
            let words = parts.iter().map(|p| p.words()).sum();
            result = Shape::Array(words);
            result_parts = Some(parts);
        }
        syn::ReturnType::Type(_, ty) => {
            // The type's own error would say "argument": one message about results instead.
            match param_type(ty) {
                Ok(kind) => result = kind,
                Err(_) => diag.error(
                    ty.span(),
                    format!(
                        "a differentiable function returns `f32`, `[f32; M]` or a tuple of \
                         those (found `{}`)",
                        quote::quote!(#ty)
                    ),
                ),
            }
        }
    }
    (result, result_parts)
}

/// Whether `ty` is `f32` or `f64` (`precision.rs` reports a function that mixes them).
pub(super) fn is_float(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => {
            p.qself.is_none()
                && p.path
                    .get_ident()
                    .is_some_and(|i| Precision::named(&i.to_string()).is_some())
        }
        syn::Type::Paren(p) => is_float(&p.elem),
        syn::Type::Group(g) => is_float(&g.elem),
        _ => false,
    }
}

/// The shape of an argument type, or an error saying what is supported.
pub(super) fn param_type(ty: &syn::Type) -> Result<Shape, syn::Error> {
    value_type(ty, "argument")
}

/// The shape of the declared type of a `let`, or an error saying what is supported.
pub(super) fn local_type(ty: &syn::Type) -> Result<Shape, syn::Error> {
    value_type(ty, "variable")
}

/// The shape of the type of an argument or a variable (`what`), or an error saying what is
/// supported.
fn value_type(ty: &syn::Type, what: &str) -> Result<Shape, syn::Error> {
    // A type passed through a `macro_rules!` `$t:ty` arrives in an invisible group.
    if let syn::Type::Group(g) = ty {
        return value_type(&g.elem, what);
    }
    if let syn::Type::Paren(p) = ty {
        return value_type(&p.elem, what);
    }
    if is_float(ty) {
        return Ok(Shape::Scalar);
    }
    match ty {
        syn::Type::Array(arr) => {
            if !is_float(&arr.elem) {
                return Err(syn::Error::new(
                    arr.elem.span(),
                    format!(
                        "array {what}s must be `[f32; N]`: nested arrays and other element \
                     types are not supported"
                    ),
                ));
            }
            Ok(Shape::Array(array_len(&arr.len)?))
        }
        syn::Type::Reference(r) => Err(syn::Error::new(
            r.span(),
            format!(
                "references are not supported: take the {what} by value (`x: f32` or \
                 `p: [f32; N]`)"
            ),
        )),
        other if what == "variable" => Err(syn::Error::new(
            other.span(),
            format!(
                "unsupported variable type `{}`: variables are `f32`, `[f32; N]` or `bool`; \
                 an integer is a `const N: usize = ...;` or a loop index",
                quote::quote!(#other)
            ),
        )),
        other => Err(syn::Error::new(
            other.span(),
            format!(
                "unsupported argument type `{}`: arguments are `f32` or `[f32; N]`",
                quote::quote!(#other)
            ),
        )),
    }
}

/// Most words of one array (a `#[shared]` argument, a per-element one or a local): 4 MiB.
/// Past it a kernel could bind no such buffer, and the compiler would spend the build's
/// memory on it (`[0.0; 4294967295]` took a fuzzed build down).
pub(crate) const MAX_ARRAY_LEN: usize = 1 << 20;

/// The length of `[f32; N]`: a positive integer literal, at most [`MAX_ARRAY_LEN`].
pub(super) fn array_len(len: &syn::Expr) -> Result<usize, syn::Error> {
    match len {
        // A `macro_rules!` fragment (`[f32; $n]`) arrives wrapped in an invisible group.
        syn::Expr::Group(g) => array_len(&g.expr),
        syn::Expr::Paren(p) => array_len(&p.expr),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => match i.base10_parse::<usize>()? {
            0 => Err(syn::Error::new(
                i.span(),
                "arrays must have at least one element",
            )),
            n if n > MAX_ARRAY_LEN => Err(syn::Error::new(
                i.span(),
                format!(
                    "an array holds at most {MAX_ARRAY_LEN} words (2^20, 4 MiB); split the data \
                     over several arguments"
                ),
            )),
            n => Ok(n),
        },
        other => Err(syn::Error::new(
            other.span(),
            "array lengths must be integer literals (`[f32; 3]`)",
        )),
    }
}
