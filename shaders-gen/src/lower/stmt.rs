//! Statements: bodies and blocks, `let`, assignment, `if`/`else`, `const`.

use super::expr::Index;
use super::signature::{is_float, local_type};
use super::syntax::{is_compound_assign, target_has_index};
use super::*;

impl Lowerer {
    pub(super) fn lower_body(&mut self, block: &syn::Block) -> Option<Vec<ValueId>> {
        // The body is a scope of its own: scope 0 holds the arguments.
        let tail = self.lower_block(block);
        match (tail, self.result) {
            (Tail::Value(Value::Scalar(v)), Some(Kind::Real(Shape::Scalar))) => Some(vec![v]),
            (Tail::Value(Value::Array(vs, n)), Some(Kind::Real(Shape::Array(m)))) if n == m => {
                let span = block.brace_token.span.close();
                Some(self.b.words_of(vs, span))
            }
            (Tail::Failed, _) => None,
            (Tail::Unit, expected) => {
                if let (Some(expected), false) = (expected, self.saw_return) {
                    let span = block.brace_token.span.close();
                    self.error(
                        span,
                        format!("the body must end with the result: {expected} without a `;`"),
                    );
                }
                None
            }
            (Tail::Value(v), expected) => {
                if let Some(expected) = expected {
                    let span = block
                        .stmts
                        .last()
                        .map_or(block.brace_token.span.close(), |s| s.span());
                    self.error(
                        span,
                        format!("the result must be {expected}, found {}", v.kind()),
                    );
                }
                None
            }
        }
    }

    /// A `{ ... }` block in its own scope: names it declares end with it, assignments to
    /// variables from outside stay.
    pub(super) fn lower_block(&mut self, block: &syn::Block) -> Tail {
        self.scopes.push(HashMap::new());
        let tail = self.lower_stmts(&block.stmts);
        self.scopes.pop();
        tail
    }

    pub(super) fn lower_stmts(&mut self, stmts: &[syn::Stmt]) -> Tail {
        let n = stmts.len();
        for (i, stmt) in stmts.iter().enumerate() {
            let last = i + 1 == n;
            match stmt {
                syn::Stmt::Local(local) => self.lower_let(local),
                syn::Stmt::Expr(e, None) if last => return self.lower_tail(e),
                syn::Stmt::Expr(e, semi) => self.lower_statement(e, semi.is_some()),
                syn::Stmt::Item(syn::Item::Const(c)) => self.lower_const(c),
                syn::Stmt::Item(item) => self.error(
                    item.span(),
                    "items (functions, structs, uses, ...) inside a differentiable body are \
                     not supported: define them outside",
                ),
                syn::Stmt::Macro(m) => self.error(
                    m.mac.path.span(),
                    "macros are not supported inside a differentiable body",
                ),
            }
        }
        Tail::Unit
    }

    /// The last line of a block, without `;`: a value, or a statement that has none.
    pub(super) fn lower_tail(&mut self, e: &syn::Expr) -> Tail {
        match e {
            syn::Expr::If(i) => self.lower_if(i),
            syn::Expr::Block(b) if b.label.is_none() => self.lower_block(&b.block),
            syn::Expr::Assign(_) => {
                self.lower_statement(e, false);
                Tail::Unit
            }
            syn::Expr::Binary(b) if is_compound_assign(&b.op) => {
                self.lower_statement(e, false);
                Tail::Unit
            }
            syn::Expr::ForLoop(f) => {
                self.lower_for(f);
                Tail::Unit
            }
            _ => match self.lower_expr(e) {
                Some(v) => Tail::Value(v),
                None => Tail::Failed,
            },
        }
    }

    pub(super) fn lower_statement(&mut self, e: &syn::Expr, _semi: bool) {
        match e {
            syn::Expr::Assign(a) => self.lower_assign(&a.left, &a.right, None, a.eq_token.span),
            syn::Expr::Binary(b) if is_compound_assign(&b.op) => {
                use syn::BinOp as B;
                let func = match b.op {
                    B::AddAssign(_) => Func::Add,
                    B::SubAssign(_) => Func::Sub,
                    B::MulAssign(_) => Func::Mul,
                    B::DivAssign(_) => Func::Div,
                    op => {
                        self.error(
                            op.span(),
                            "only `+= -= *= /=` are supported among compound assignments",
                        );
                        return;
                    }
                };
                self.lower_assign(&b.left, &b.right, Some(func), b.op.span());
            }
            syn::Expr::If(i) => {
                let tail = self.lower_if(i);
                self.statement_value(e, tail)
            }
            syn::Expr::Block(b) if b.label.is_none() => {
                let tail = self.lower_block(&b.block);
                self.statement_value(e, tail)
            }
            syn::Expr::ForLoop(f) => self.lower_for(f),
            _ => {
                // Lower it for its own diagnostics; a supported expression here is useless.
                if self.lower_expr(e).is_some() {
                    self.useless_value(e);
                }
            }
        }
    }

    pub(super) fn statement_value(&mut self, e: &syn::Expr, tail: Tail) {
        if let Tail::Value(_) = tail {
            self.useless_value(e);
        }
    }

    pub(super) fn useless_value(&mut self, e: &syn::Expr) {
        self.error(
            e.span(),
            "this value is not used: bind it with `let`, assign it, or make it the final \
             expression (without `;`)",
        );
    }

    /// `if`/`else`: both branches are lowered, and every variable they assign, and the
    /// value, becomes a select on the condition.
    pub(super) fn lower_if(&mut self, i: &syn::ExprIf) -> Tail {
        let span = i.if_token.span;
        let cond = self.boolean(&i.cond);
        let before: Vec<Option<Value>> = self.vars.iter().map(|v| v.value.clone()).collect();
        let then_tail = self.lower_block(&i.then_branch);
        let then_vals: Vec<Option<Value>> = self.vars[..before.len()]
            .iter()
            .map(|v| v.value.clone())
            .collect();
        self.vars.truncate(before.len());
        for (var, v) in self.vars.iter_mut().zip(&before) {
            var.value = v.clone();
        }
        let else_tail = match &i.else_branch {
            None => Tail::Unit,
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => self.lower_if(inner),
                syn::Expr::Block(b) => self.lower_block(&b.block),
                other => self.lower_tail(other),
            },
        };
        self.vars.truncate(before.len());
        for (k, then_val) in then_vals.into_iter().enumerate() {
            if then_val == self.vars[k].value {
                continue;
            }
            let merged = match (cond, then_val, self.vars[k].value.take()) {
                (Some(c), Some(t), Some(e)) => self.merge(c, t, e, span),
                _ => None,
            };
            if let Some(v) = &merged {
                let name = self.vars[k].name.clone();
                self.name_value(v, &name);
            }
            self.vars[k].value = merged;
        }
        match (then_tail, else_tail) {
            (Tail::Failed, _) | (_, Tail::Failed) => Tail::Failed,
            (Tail::Unit, Tail::Unit) => Tail::Unit,
            (Tail::Value(t), Tail::Value(e)) => {
                if t.kind() != e.kind() {
                    self.error(
                        span,
                        format!(
                            "the branches of this `if` have different types: {} and {}",
                            t.kind(),
                            e.kind()
                        ),
                    );
                    return Tail::Failed;
                }
                match cond.and_then(|c| self.merge(c, t, e, span)) {
                    Some(v) => Tail::Value(v),
                    None => Tail::Failed,
                }
            }
            (Tail::Value(_), Tail::Unit) if i.else_branch.is_none() => {
                self.error(
                    i.then_branch.span(),
                    "an `if` without `else` has no value: add an `else` branch, or end this \
                     branch with a statement (`;`)",
                );
                Tail::Failed
            }
            (t, _) => {
                let (with, without) = if matches!(t, Tail::Value(_)) {
                    ("the first", "the other")
                } else {
                    ("the other", "the first")
                };
                self.error(
                    span,
                    format!(
                        "{with} branch of this `if` has a value and {without} does not: end \
                         both with a value, or both with a statement (`;`)"
                    ),
                );
                Tail::Failed
            }
        }
    }

    /// `if c { t } else { e }` of two values of the same shape.
    pub(super) fn merge(&mut self, c: ValueId, t: Value, e: Value, span: Span) -> Option<Value> {
        Some(match (t, e) {
            (Value::Scalar(t), Value::Scalar(e)) => Value::Scalar(self.b.select(c, t, e, span)),
            (Value::Bool(t), Value::Bool(e)) => Value::Bool(self.b.select(c, t, e, span)),
            (Value::Array(t, n), Value::Array(e, m)) if n == m => {
                Value::Array(self.b.select(c, t, e, span), n)
            }
            // Assignments keep a variable's shape, so branches cannot disagree on it.
            _ => return None,
        })
    }

    pub(super) fn name_value(&mut self, v: &Value, name: &str) {
        match v {
            Value::Scalar(v) | Value::Bool(v) | Value::Int(v, ..) => self.b.name(*v, name),
            Value::Array(v, _) => {
                self.b.name(*v, name);
                // Words of an array literal are named after their element, as when they
                // are read one by one (an unrolled loop, constant indices).
                if let Op::ArrayNew(elems) = &self.b.node(*v).op {
                    for (j, e) in elems.clone().iter().enumerate() {
                        self.b.name(*e, &format!("{name}_{j}"));
                    }
                }
            }
        }
    }

    /// `target = rhs` or, with `op`, `target op= rhs`; `target` is a variable or an
    /// element of an array variable with a literal index.
    pub(super) fn lower_assign(
        &mut self,
        target: &syn::Expr,
        rhs: &syn::Expr,
        op: Option<Func>,
        span: Span,
    ) {
        let (var_expr, index) = match target {
            syn::Expr::Index(ix) => (&*ix.expr, Some(&*ix.index)),
            other => (other, None),
        };
        let var = self.assign_target(var_expr);
        let index = index.and_then(|e| self.index_value(e).map(|k| (k, e)));
        let value = self.lower_expr(rhs);
        let Some(var) = var else { return };
        if !self.vars[var].mutable {
            let name = self.vars[var].name.clone();
            let fix = if self.vars[var].argument {
                format!("declare the argument `mut {name}` in the signature")
            } else {
                format!("declare it `let mut {name}`")
            };
            self.error(
                var_expr.span(),
                format!("cannot assign to `{name}`: it is not mutable ({fix})"),
            );
            return;
        }
        if target_has_index(target) && index.is_none() {
            return;
        }
        let (Some(current), Some(value)) = (self.vars[var].value.clone(), value) else {
            // Something already failed: keep quiet and make later uses quiet too.
            self.vars[var].value = None;
            return;
        };
        let name = self.vars[var].name.clone();
        let new = match (index, current) {
            (None, current) => self.assign_whole(&name, op, current, value, rhs, span),
            (Some(index), Value::Array(array, len)) => {
                self.assign_element(&name, (array, len), index, op, value, rhs, span)
            }
            (Some(_), other) => {
                self.error(
                    var_expr.span(),
                    format!("only arrays can be indexed; `{name}` is {}", other.kind()),
                );
                None
            }
        };
        let Some(new) = new else { return };
        self.name_value(&new, &name);
        self.vars[var].value = Some(new);
    }

    /// The variable an assignment writes (`x` of `x = ..` or `x[i] = ..`), if it is one in
    /// scope (else reported).
    fn assign_target(&mut self, var_expr: &syn::Expr) -> Option<usize> {
        match var_expr {
            syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                let name = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                match self.lookup(&name) {
                    Some(id) => Some(id),
                    None => {
                        self.error(p.span(), format!("cannot find `{name}` here"));
                        None
                    }
                }
            }
            other => {
                self.error(
                    other.span(),
                    "only a variable (`x = ...`) or an element of an array variable \
                     (`a[0] = ...`) can be assigned",
                );
                None
            }
        }
    }

    /// `x = v` or `x op= v` of a whole variable: the new value, or `None` (reported).
    fn assign_whole(
        &mut self,
        name: &str,
        op: Option<Func>,
        current: Value,
        value: Value,
        rhs: &syn::Expr,
        span: Span,
    ) -> Option<Value> {
        match (op, &current, &value) {
            (None, c, v) if c.kind() == v.kind() => Some(value),
            (None, c, v) => {
                self.error(
                    rhs.span(),
                    format!(
                        "type mismatch: `{name}` is {} but the value is {}",
                        c.kind(),
                        v.kind()
                    ),
                );
                None
            }
            (Some(f), Value::Scalar(c), Value::Scalar(v)) => {
                Some(Value::Scalar(self.b.call(f, vec![*c, *v], span)))
            }
            (Some(_), c, v) => {
                self.error(
                    span,
                    format!(
                        "compound assignment needs two `f32` values, found {} and {}; \
                         for arrays, assign each element (`a[0] += ...`)",
                        c.kind(),
                        v.kind()
                    ),
                );
                None
            }
        }
    }

    /// `a[k] = v` or `a[k] op= v`: the array with element `k` replaced, or `None`
    /// (reported).
    #[allow(clippy::too_many_arguments)]
    fn assign_element(
        &mut self,
        name: &str,
        (array, len): (ValueId, usize),
        (k, kexpr): ((ValueId, i64, i64), &syn::Expr),
        op: Option<Func>,
        value: Value,
        rhs: &syn::Expr,
        span: Span,
    ) -> Option<Value> {
        let Value::Scalar(v) = value else {
            self.error(
                rhs.span(),
                format!(
                    "an array element is an `f32`, but the value is {}",
                    value.kind()
                ),
            );
            return None;
        };
        let checked = self.check_index(kexpr, k, len)?;
        let index = match checked {
            Index::Const(k) => self.b.int(k as i64, span),
            Index::Dynamic(idx) => idx,
        };
        let value = match op {
            None => v,
            Some(f) => {
                let old = self.b.push(Op::ArrayGet { array, index }, span, None);
                self.b.call(f, vec![old, v], span)
            }
        };
        if let Index::Const(k) = checked {
            self.b.name(value, &format!("{name}_{k}"));
        }
        Some(Value::Array(self.b.set(array, index, value, span), len))
    }

    pub(super) fn lower_let(&mut self, local: &syn::Local) {
        let (pat, ty) = match &local.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        let (name, mutable) = match pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (Some(pi.ident.to_string()), pi.mutability.is_some())
            }
            syn::Pat::Wild(_) => (None, false),
            syn::Pat::Tuple(t) if self.lower_tuple_let(t, local) => return,
            other => {
                self.error(
                    other.span(),
                    "only `let name = ...;` and `let (a, b) = (x, y);` bindings are \
                     supported (no struct patterns, no tuple but one written out or \
                     `x.sin_cos()`): write one `let` per name",
                );
                // The names it meant to bind: their reads are not more errors, and the
                // value's parts are checked for errors of their own, not as a tuple.
                pattern_names(other, &mut self.failed_names);
                if let Some(init) = &local.init
                    && let syn::Expr::Tuple(_) = &*init.expr
                {
                    self.check_tuple_parts(&init.expr);
                    return;
                }
                (None, false)
            }
        };
        let expected = ty.and_then(|t| self.binding_type(t));
        let Some(init) = &local.init else {
            self.error(
                local.span(),
                "a `let` needs a value: `let name = expression;`",
            );
            return;
        };
        if let Some((else_tok, _)) = &init.diverge {
            self.error(else_tok.span, "`let ... else` is not supported");
        }
        let value = self.lower_expr(&init.expr);
        if let (Some(expected), Some(v)) = (expected, &value)
            && v.kind() != expected
        {
            self.error(
                init.expr.span(),
                format!(
                    "type mismatch: the binding is declared {expected} but the value is {}",
                    v.kind()
                ),
            );
            if let Some(name) = name {
                self.declare(name, None, mutable);
            }
            return;
        }
        if let Some(name) = name {
            if let Some(v) = &value {
                self.name_value(v, &name);
            }
            self.declare(name, value, mutable);
        }
    }

    /// `let (a, mut b, _) = (x, y, z);`: each name bound to its value, every value computed
    /// before any name is bound (so `let (a, b) = (b, a);` swaps). False where the pattern
    /// is not a tuple of names over a tuple written out (the caller reports it).
    fn lower_tuple_let(&mut self, pat: &syn::PatTuple, local: &syn::Local) -> bool {
        let names: Option<Vec<Option<(String, bool)>>> = (pat.elems.iter())
            .map(|p| match p {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                    Some(Some((pi.ident.to_string(), pi.mutability.is_some())))
                }
                syn::Pat::Wild(_) => Some(None),
                _ => None,
            })
            .collect();
        let (Some(names), Some(init)) = (names, &local.init) else {
            return false;
        };
        let values = match &*init.expr {
            syn::Expr::Tuple(values) => TupleValues::Written(&values.elems),
            e => match sin_cos_receiver(e) {
                Some(x) => TupleValues::SinCos(x),
                None => return false,
            },
        };
        let count = match values {
            TupleValues::Written(values) => values.len(),
            TupleValues::SinCos(_) => 2,
        };
        if init.diverge.is_some() {
            return false;
        }
        if count != names.len() {
            self.error(
                init.expr.span(),
                format!(
                    "the pattern binds {} names but the tuple holds {count} values",
                    names.len(),
                ),
            );
            for (name, _) in names.into_iter().flatten() {
                self.failed_names.insert(name);
            }
            return true;
        }
        let lowered: Vec<Option<Value>> = match values {
            TupleValues::Written(values) => values.iter().map(|e| self.lower_expr(e)).collect(),
            // The receiver once, its sine and cosine from the table.
            TupleValues::SinCos(x) => match self.scalar(x) {
                Some(v) => [Func::Sin, Func::Cos]
                    .map(|f| Some(Value::Scalar(self.b.call(f, vec![v], init.expr.span()))))
                    .to_vec(),
                None => vec![None, None],
            },
        };
        for (name, value) in names.into_iter().zip(lowered) {
            if let Some((name, mutable)) = name {
                if let Some(v) = &value {
                    self.name_value(v, &name);
                }
                self.declare(name, value, mutable);
            }
        }
        true
    }

    /// Lowers the values of a tuple written out (nested too) for their own errors only.
    fn check_tuple_parts(&mut self, e: &syn::Expr) {
        match e {
            syn::Expr::Tuple(t) => t.elems.iter().for_each(|p| self.check_tuple_parts(p)),
            e => {
                self.lower_expr(e);
            }
        }
    }

    /// The declared type of a `let`: what arguments may be, or `bool`.
    pub(super) fn binding_type(&mut self, ty: &syn::Type) -> Option<Kind> {
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && p.path.is_ident("bool")
        {
            return Some(Kind::Bool);
        }
        self.diag.report(local_type(ty)).map(Kind::Real)
    }

    /// `const N: usize = 8;` in the body: an integer known at compile time.
    pub(super) fn lower_const(&mut self, c: &syn::ItemConst) {
        let name = c.ident.to_string();
        let value = match self.lower_expr(&c.expr) {
            Some(v @ Value::Int(_, lo, hi)) if lo == hi => Some(v),
            Some(Value::Int(..)) | None => None,
            Some(v @ Value::Scalar(_)) if is_float(&c.ty) => Some(v),
            Some(other) => {
                self.error(
                    c.expr.span(),
                    format!(
                        "a `const` in a differentiable body is an integer or an `f32`, found {}",
                        other.kind()
                    ),
                );
                None
            }
        };
        self.declare(name, value, false);
    }
}

/// Every name a pattern binds, into `names`.
fn pattern_names(pat: &syn::Pat, names: &mut std::collections::HashSet<String>) {
    match pat {
        syn::Pat::Ident(p) => {
            names.insert(p.ident.to_string());
            if let Some((_, sub)) = &p.subpat {
                pattern_names(sub, names);
            }
        }
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|p| pattern_names(p, names)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pattern_names(p, names)),
        syn::Pat::Slice(s) => s.elems.iter().for_each(|p| pattern_names(p, names)),
        syn::Pat::Or(o) => o.cases.iter().for_each(|p| pattern_names(p, names)),
        syn::Pat::Struct(s) => s.fields.iter().for_each(|f| pattern_names(&f.pat, names)),
        syn::Pat::Reference(r) => pattern_names(&r.pat, names),
        syn::Pat::Paren(p) => pattern_names(&p.pat, names),
        syn::Pat::Type(t) => pattern_names(&t.pat, names),
        _ => {}
    }
}

/// The values a tuple `let` binds.
#[derive(Clone, Copy)]
enum TupleValues<'e> {
    /// `(x, y, ..)`.
    Written(&'e syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>),
    /// `x.sin_cos()`: the receiver `x`.
    SinCos(&'e syn::Expr),
}

/// The receiver of `x.sin_cos()` or `f32::sin_cos(x)` (`f64::` too), the one call that
/// returns a tuple: a `let (s, c) = ...` binds its sine and cosine.
fn sin_cos_receiver(e: &syn::Expr) -> Option<&syn::Expr> {
    match e {
        syn::Expr::MethodCall(mc)
            if mc.method == "sin_cos" && mc.args.is_empty() && mc.turbofish.is_none() =>
        {
            Some(&mc.receiver)
        }
        syn::Expr::Call(call) if call.args.len() == 1 => match &*call.func {
            syn::Expr::Path(p)
                if p.qself.is_none()
                    && crate::signature::Precision::of_method_path(&p.path).is_some()
                    && p.path.segments[1].ident == "sin_cos" =>
            {
                call.args.first()
            }
            _ => None,
        },
        _ => None,
    }
}
