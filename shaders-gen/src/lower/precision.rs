//! Which float type a function is written over: `f32` or `f64`, decided by its signature.
//! The rest of lowering accepts either type name; this pass alone reports a function that
//! mixes them (one message per token of the other type, at that token).

use super::Diagnostics;
use crate::signature::Precision;
use syn::visit::Visit;

/// The precision of `item` (its signature's float type, `f32` if it names none), with
/// every mention of the other float type reported.
pub(super) fn precision_of(item: &syn::ItemFn, diag: &mut Diagnostics) -> Precision {
    let mut sig = Mentions::default();
    sig.visit_signature(&item.sig);
    let precision = if sig.f64.len() > sig.f32.len() {
        Precision::F64
    } else {
        Precision::F32
    };
    let mut body = Mentions::default();
    body.visit_block(&item.block);
    let (name, other) = (precision.name(), precision.other().name());
    for span in sig
        .of(precision.other())
        .iter()
        .chain(body.of(precision.other()))
    {
        diag.error(
            *span,
            format!(
                "`{other}` in a function over `{name}`: a differentiable function is written \
                 in one precision, its signature's (write `{name}` here)"
            ),
        );
    }
    precision
}

/// Where `f32` and `f64` are named: types, literal suffixes, `std::f32::consts` paths.
#[derive(Default)]
struct Mentions {
    f32: Vec<proc_macro2::Span>,
    f64: Vec<proc_macro2::Span>,
}

impl Mentions {
    fn of(&self, p: Precision) -> &[proc_macro2::Span] {
        match p {
            Precision::F32 => &self.f32,
            Precision::F64 => &self.f64,
        }
    }

    fn note(&mut self, name: &str, span: proc_macro2::Span) {
        match Precision::named(name) {
            Some(Precision::F32) => self.f32.push(span),
            Some(Precision::F64) => self.f64.push(span),
            None => {}
        }
    }
}

impl<'ast> Visit<'ast> for Mentions {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        // `f32` as a type, or as the module of `std::f32::consts::PI`.
        for seg in &p.segments {
            self.note(&seg.ident.to_string(), seg.ident.span());
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_lit_float(&mut self, lit: &'ast syn::LitFloat) {
        self.note(lit.suffix(), lit.span());
    }

    fn visit_item_fn(&mut self, _: &'ast syn::ItemFn) {
        // A nested item is reported by lowering as unsupported; its types are its own.
    }
}
