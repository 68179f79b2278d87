//! Questions about syntax that need no lowering context.

use super::*;

pub(super) fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp as B;
    matches!(
        op,
        B::AddAssign(_)
            | B::SubAssign(_)
            | B::MulAssign(_)
            | B::DivAssign(_)
            | B::RemAssign(_)
            | B::BitXorAssign(_)
            | B::BitAndAssign(_)
            | B::BitOrAssign(_)
            | B::ShlAssign(_)
            | B::ShrAssign(_)
    )
}

/// The parts of a tuple type of `f32` and `[f32; N]`, or `None`.
pub(super) fn tuple_parts(ty: &syn::Type) -> Option<Vec<Shape>> {
    match ty {
        syn::Type::Tuple(t) if !t.elems.is_empty() => {
            t.elems.iter().map(|e| param_type(e).ok()).collect()
        }
        syn::Type::Group(g) => tuple_parts(&g.elem),
        syn::Type::Paren(p) => tuple_parts(&p.elem),
        _ => None,
    }
}

pub(super) fn target_has_index(target: &syn::Expr) -> bool {
    matches!(target, syn::Expr::Index(_))
}

/// Whether an expression is integer (a literal, a name `is_int_name` says holds an integer,
/// or arithmetic with one), so that `i + 1` and `j * j` lower as integer arithmetic.
pub(super) fn is_integer_expr(e: &syn::Expr, is_int_name: &dyn Fn(&str) -> bool) -> bool {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(_),
            ..
        }) => true,
        syn::Expr::Path(p) => p
            .path
            .get_ident()
            .is_some_and(|i| is_int_name(&i.to_string())),
        syn::Expr::Paren(p) => is_integer_expr(&p.expr, is_int_name),
        syn::Expr::Group(g) => is_integer_expr(&g.expr, is_int_name),
        syn::Expr::Binary(b) => {
            is_integer_expr(&b.left, is_int_name) || is_integer_expr(&b.right, is_int_name)
        }
        _ => false,
    }
}

/// The names a block assigns (`x = ..`, `x += ..`, `a[i] = ..`), in nested blocks too.
pub(super) fn assigned_names(block: &syn::Block) -> std::collections::HashSet<String> {
    use syn::visit::Visit;
    struct Assigned(std::collections::HashSet<String>);
    impl Visit<'_> for Assigned {
        fn visit_expr_assign(&mut self, a: &syn::ExprAssign) {
            self.target(&a.left);
            syn::visit::visit_expr_assign(self, a);
        }
        fn visit_expr_binary(&mut self, b: &syn::ExprBinary) {
            if is_compound_assign(&b.op) {
                self.target(&b.left);
            }
            syn::visit::visit_expr_binary(self, b);
        }
    }
    impl Assigned {
        fn target(&mut self, e: &syn::Expr) {
            match e {
                syn::Expr::Index(ix) => self.target(&ix.expr),
                syn::Expr::Paren(p) => self.target(&p.expr),
                syn::Expr::Path(p) => {
                    if let Some(i) = p.path.get_ident() {
                        self.0.insert(i.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let mut a = Assigned(Default::default());
    a.visit_block(block);
    a.0
}
