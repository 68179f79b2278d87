//! Calls between differentiable functions.
//!
//! A proc macro sees only its own item, so a function that calls `f` cannot read `f`'s body
//! when it is expanded. Instead, `#[differentiable]` puts beside every function `f` a
//! module `f_differentiable_source` with a `macro_rules!` macro that hands `f`'s source to a
//! continuation ([`source_module`]). A caller's expansion asks each callee in turn, through
//! [`callback`], and the last answer reaches `gradfuse::__differentiable_with!`, which asks
//! for the callees' own callees and finally compiles the caller with every source
//! ([`expand_with`]): calls are inlined into the caller's IR, so every generated version
//! (CPU, dual, reverse, WGSL) of the caller includes them. The source module is emitted
//! before anything waits on other functions, so functions that call each other find each
//! other's source, and the recursion is reported as such.
//!
//! Callees are found through paths (`f(x)`, `geom::dist(p, q)`). A call to a function that
//! is not `#[differentiable]`, or that lives in another crate (the source macro is
//! crate-private), fails with rustc's error that `f_differentiable_source` is not found;
//! a call of one of the function's own values (a closure) or of a constructor (`Some(x)`)
//! is reported before any callee is asked ([`uncallable`]).

use crate::signature::Precision;
use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::parse::{ParseStream, Parser};
use syn::visit::Visit;

/// The paths of the functions a body calls, but `f32::sin(x)`-style method paths: each
/// must be a `#[differentiable]` function.
pub fn callees(item: &syn::ItemFn) -> Vec<syn::Path> {
    struct Calls(Vec<syn::Path>);
    impl Visit<'_> for Calls {
        fn visit_expr_call(&mut self, c: &syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func
                && p.qself.is_none()
                && Precision::of_method_path(&p.path).is_none()
            {
                let key = p.path.to_token_stream().to_string();
                if !self
                    .0
                    .iter()
                    .any(|q| q.to_token_stream().to_string() == key)
                {
                    self.0.push(p.path.clone());
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut calls = Calls(Vec::new());
    calls.visit_block(&item.block);
    if let Some(g) = custom_grad(item) {
        calls.0.push(g);
    }
    calls.0
}

/// Calls that cannot reach a `#[differentiable]` function, each with its error: a call of
/// one of the function's own values (a closure), or of a constructor (`Some(x)`,
/// `Point(..)`). They are reported before the callees are asked for their sources, where a
/// call would otherwise end in rustc's "cannot find `g_differentiable_source`".
pub fn uncallable(item: &syn::ItemFn) -> Vec<syn::Error> {
    struct Names(Vec<String>);
    impl Visit<'_> for Names {
        fn visit_pat_ident(&mut self, p: &syn::PatIdent) {
            self.0.push(p.ident.to_string());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut names = Names(Vec::new());
    names.visit_item_fn(item);
    struct Calls<'n> {
        locals: &'n [String],
        errors: Vec<syn::Error>,
    }
    impl Visit<'_> for Calls<'_> {
        fn visit_expr_call(&mut self, c: &syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func
                && let Some(last) = p.path.segments.last()
            {
                let name = last.ident.to_string();
                if p.path.segments.len() == 1 && self.locals.contains(&name) {
                    self.errors.push(syn::Error::new_spanned(
                        &p.path,
                        format!(
                            "`{name}` is a value of this function (a closure?), not a function: a call \
                             goes to a #[differentiable] function"
                        ),
                    ));
                } else if name.starts_with(|ch: char| ch.is_ascii_uppercase()) {
                    self.errors.push(syn::Error::new_spanned(
                        &p.path,
                        format!(
                            "`{name}(..)` builds a value of an enum or struct: a differentiable body \
                             computes with f32 values, arrays and tuples"
                        ),
                    ));
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut calls = Calls {
        locals: &names.0,
        errors: Vec::new(),
    };
    calls.visit_block(&item.block);
    calls.errors
}

/// The function named by `grad = ...` in `#[differentiable(grad = ...)]` (kept on the
/// function as the attribute `#[gradfuse_grad(path)]`).
pub fn custom_grad(item: &syn::ItemFn) -> Option<syn::Path> {
    item.attrs
        .iter()
        .find(|a| a.path().is_ident("gradfuse_grad"))
        .and_then(|a| a.parse_args().ok())
}

/// The name a callee is known by: the last segment of its path.
pub fn callee_name(path: &syn::Path) -> String {
    path.segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

/// What a chain of expansions carries: the sources gathered so far (each with the path,
/// from the caller's module, of the module it was defined in), the callee asked last, the
/// callees still to ask, the caller's attribute arguments and the caller.
pub struct State {
    /// Callees' sources, with their modules' paths.
    pub sources: Vec<(Vec<String>, syn::ItemFn)>,
    /// The callee whose source is on its way.
    pub in_flight: Option<syn::Path>,
    /// Callees still to ask.
    pub pending: Vec<syn::Path>,
    /// The caller's `#[differentiable(...)]` arguments.
    pub attr: TokenStream,
    /// The caller.
    pub item: syn::ItemFn,
}

impl State {
    fn to_tokens(&self) -> TokenStream {
        let sources = self.sources.iter().map(|(module, item)| {
            let module = module.join(" ");
            quote!(source [ #module ] [ #item ])
        });
        let in_flight = self.in_flight.iter();
        let pending = &self.pending;
        let attr = &self.attr;
        let item = &self.item;
        quote! {
            #(#sources)*
            in_flight [ #(#in_flight)* ]
            pending [ #(#pending),* ]
            attr [ #attr ]
            item [ #item ]
        }
    }

    fn parse(input: ParseStream) -> syn::Result<State> {
        // The source that just arrived, put first by the callee's macro.
        let mut arrived = None;
        if input.peek(syn::Token![@]) {
            input.parse::<syn::Token![@]>()?;
            let kw: syn::Ident = input.parse()?;
            if kw != "source" {
                return Err(syn::Error::new(kw.span(), "expected `source`"));
            }
            let content;
            syn::bracketed!(content in input);
            arrived = Some(content.parse::<syn::ItemFn>()?);
        }
        let mut sources = Vec::new();
        while input.peek(syn::Ident) && input.fork().parse::<syn::Ident>()? == "source" {
            input.parse::<syn::Ident>()?;
            let module;
            syn::bracketed!(module in input);
            let module: syn::LitStr = module.parse()?;
            let content;
            syn::bracketed!(content in input);
            let module = module
                .value()
                .split_whitespace()
                .map(str::to_string)
                .collect();
            sources.push((module, content.parse()?));
        }
        let group = |input: ParseStream, name: &str| -> syn::Result<TokenStream> {
            let kw: syn::Ident = input.parse()?;
            if kw != name {
                return Err(syn::Error::new(kw.span(), format!("expected `{name}`")));
            }
            let content;
            syn::bracketed!(content in input);
            content.parse()
        };
        let in_flight = group(input, "in_flight")?;
        let in_flight: Option<syn::Path> = if in_flight.is_empty() {
            None
        } else {
            Some(syn::parse2(in_flight)?)
        };
        if let (Some(item), Some(path)) = (arrived, &in_flight) {
            sources.push((module_of(path), item));
        }
        let pending = group(input, "pending")?;
        let pending = syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated
            .parse2(pending)?
            .into_iter()
            .collect();
        let attr = group(input, "attr")?;
        let item = syn::parse2(group(input, "item")?)?;
        Ok(State {
            sources,
            in_flight: None,
            pending,
            attr,
            item,
        })
    }
}

/// The segments of the module a callee path names its function in (`geom::dist` ->
/// `geom`; `dist` -> nothing).
fn module_of(path: &syn::Path) -> Vec<String> {
    let mut segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segs.pop();
    if path.leading_colon.is_some() {
        segs.insert(0, "::".to_string());
    }
    segs
}

/// `path`, written in module `module` (relative to the caller's), as seen from the
/// caller's module.
fn resolve(module: &[String], path: &syn::Path) -> syn::Path {
    let first = path.segments.first().map(|s| s.ident.to_string());
    if path.leading_colon.is_some() || module.is_empty() || first.as_deref() == Some("crate") {
        return path.clone();
    }
    let mut segs: Vec<String> = module.to_vec();
    for s in &path.segments {
        let s = s.ident.to_string();
        match s.as_str() {
            "self" => {}
            "super" => match segs.last().map(String::as_str) {
                Some(last) if last != "super" && last != "::" && last != "crate" => {
                    segs.pop();
                }
                _ => segs.push(s),
            },
            _ => segs.push(s),
        }
    }
    let text = segs.join("::").replace("::::", "::");
    syn::parse_str(&text).unwrap_or_else(|_| path.clone())
}

/// The module beside `f` whose macro hands `f`'s source (as written, argument attributes
/// included) to a continuation.
pub fn source_module(item: &syn::ItemFn) -> TokenStream {
    let module = quote::format_ident!("{}_differentiable_source", item.sig.ident);
    let vis = &item.vis;
    let doc = format!(
        "The source of the differentiable function `{}`, for the differentiable functions \
         that call it.",
        item.sig.ident
    );
    quote! {
        #[doc = #doc]
        #[doc(hidden)]
        #vis mod #module {
            #[doc(hidden)]
            #[allow(unused_macros)]
            macro_rules! __gradfuse_source {
                (:: $($seg:ident)::+ { $($body:tt)* }) => {
                    :: $($seg)::+ ! { @source [ #item ] $($body)* }
                };
            }
            #[doc(hidden)]
            #[allow(unused_imports)]
            pub(crate) use __gradfuse_source;
        }
    }
}

/// Asks `callee` for its source: its source module's macro expands to
/// `gradfuse::__differentiable_with!` with the source added to `state`.
pub fn callback(callee: &syn::Path, state: &State) -> TokenStream {
    let state = State {
        sources: state.sources.clone(),
        in_flight: Some(callee.clone()),
        pending: state.pending.clone(),
        attr: state.attr.clone(),
        item: state.item.clone(),
    };
    let mut path = callee.clone();
    if let Some(last) = path.segments.last_mut() {
        last.ident = quote::format_ident!("{}_differentiable_source", last.ident);
    }
    let state = state.to_tokens();
    quote! {
        #path::__gradfuse_source! { ::gradfuse::__differentiable_with { #state } }
    }
}

/// The callees of `item` and of `sources` that `sources` do not define yet, as paths from
/// the caller's module.
pub fn missing(item: &syn::ItemFn, sources: &[(Vec<String>, syn::ItemFn)]) -> Vec<syn::Path> {
    let mut missing: Vec<syn::Path> = Vec::new();
    let own = (Vec::new(), item.clone());
    for (module, f) in std::iter::once(&own).chain(sources) {
        for c in callees(f) {
            let name = callee_name(&c);
            let known = sources.iter().any(|(_, s)| s.sig.ident == name) || item.sig.ident == name;
            if !known && !missing.iter().any(|m| callee_name(m) == name) {
                missing.push(resolve(module, &c));
            }
        }
    }
    missing
}

/// The expansion of `gradfuse::__differentiable_with!`: the next callee asked, or the
/// caller compiled with its callees' sources.
pub fn expand_with(input: TokenStream) -> TokenStream {
    let mut state = match State::parse.parse2(input) {
        Ok(s) => s,
        Err(e) => return e.to_compile_error(),
    };
    if state.pending.is_empty() {
        state.pending = missing(&state.item, &state.sources);
    }
    if !state.pending.is_empty() {
        let next = state.pending.remove(0);
        return callback(&next, &state);
    }
    let library = state.sources.into_iter().map(|(_, f)| f).collect();
    crate::expand_item(state.attr, state.item, library)
}
