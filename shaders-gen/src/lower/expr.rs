//! Expressions: literals, operators, paths, indexing and integer arithmetic.

use super::signature::{array_len, is_float};
use super::syntax::{is_compound_assign, is_integer_expr};
use super::*;

impl Lowerer {
    pub(super) fn scalar(&mut self, e: &syn::Expr) -> Option<ValueId> {
        match self.lower_expr(e)? {
            Value::Scalar(v) => Some(v),
            Value::Array(..) => {
                self.error(
                    e.span(),
                    "expected an `f32`, found an array: index it (`p[0]`); arithmetic on \
                     whole arrays is not supported",
                );
                None
            }
            Value::Bool(_) => {
                self.error(
                    e.span(),
                    "expected an `f32`, found a condition (`bool`): use it in an `if` \
                     (`if c { 1.0 } else { 0.0 }`)",
                );
                None
            }
            Value::Int(..) => {
                let msg = match e {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => format!(
                        "integer literal where an `f32` is expected: write `{}.0`",
                        i.base10_digits()
                    ),
                    _ => "expected an `f32`, found an integer (a loop index): convert it with \
                          `as f32`"
                        .to_string(),
                };
                self.error(e.span(), msg);
                None
            }
        }
    }

    /// An integer expression: a loop index, a literal, a `const`, or `+ - *` of those.
    pub(super) fn integer(&mut self, e: &syn::Expr) -> Option<(ValueId, i64, i64)> {
        self.integer_for(
            e,
            "expected an integer (a loop index, an integer literal or a `const`)",
        )
    }

    /// [`Self::integer`], with `what` saying what was expected where it is not one.
    pub(super) fn integer_for(&mut self, e: &syn::Expr, what: &str) -> Option<(ValueId, i64, i64)> {
        match self.lower_expr(e)? {
            Value::Int(v, lo, hi) => Some((v, lo, hi)),
            other => {
                self.error(e.span(), format!("{what}, found {}", other.kind()));
                None
            }
        }
    }

    /// An integer known at compile time.
    pub(super) fn constant_integer(&mut self, e: &syn::Expr, what: &str) -> Option<i64> {
        let (_, lo, hi) = self.integer(e)?;
        if lo != hi {
            self.error(
                e.span(),
                format!("{what} must be known at compile time: an integer literal or a `const`"),
            );
            return None;
        }
        Some(lo)
    }

    pub(super) fn boolean(&mut self, e: &syn::Expr) -> Option<ValueId> {
        match self.lower_expr(e)? {
            Value::Bool(v) => Some(v),
            other => {
                self.error(
                    e.span(),
                    format!(
                        "expected a condition (`bool`), found {}: compare it (`x > 0.0`)",
                        other.kind()
                    ),
                );
                None
            }
        }
    }

    pub(super) fn lower_expr(&mut self, e: &syn::Expr) -> Option<Value> {
        use syn::Expr as E;
        let span = e.span();
        match e {
            E::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => self.lower_int_literal(i),
            E::Lit(lit) => self.lower_lit(&lit.lit).map(Value::Scalar),
            E::Paren(p) => self.lower_expr(&p.expr),
            E::Group(g) => self.lower_expr(&g.expr),
            E::Unary(u) => self.lower_unary(u),
            E::Binary(bin) => self.lower_binary(bin),
            E::Path(p) => self.lower_path(p),
            E::Index(ix) => self.lower_index(ix),
            E::Array(arr) => self.lower_array_literal(arr),
            E::Repeat(r) => {
                let v = self.scalar(&r.expr);
                let n = self.diag.report(array_len(&r.len))?;
                Some(Value::Array(self.b.array(vec![v?; n], span), n))
            }
            E::MethodCall(mc) => self.lower_method(mc),
            E::Call(call) => self.lower_call(call),
            E::Cast(c) => self.lower_cast(c),
            E::If(i) => {
                let tail = self.lower_if(i);
                let missing = "this `if` has no value where one is needed: give it an `else` \
                               and end both branches with a value (without `;`)";
                self.tail_value(tail, i.if_token.span, missing)
            }
            E::Tuple(t) => self.lower_tuple(t),
            E::Block(b) if b.label.is_none() => {
                let tail = self.lower_block(&b.block);
                let missing = "this block has no value where one is needed: end it with a \
                               value (without `;`)";
                self.tail_value(tail, span, missing)
            }
            other => {
                self.reject_expr(other);
                None
            }
        }
    }

    /// An integer literal (of no suffix or an integer type's).
    fn lower_int_literal(&mut self, i: &syn::LitInt) -> Option<Value> {
        match i.base10_parse::<i64>() {
            Ok(v) if matches!(i.suffix(), "" | "usize" | "i32" | "u32" | "i64" | "isize") => {
                Some(Value::Int(self.b.int(v, i.span()), v, v))
            }
            Ok(_) => {
                self.error(i.span(), "unsupported integer literal suffix");
                None
            }
            Err(e) => {
                self.diag.push(e);
                None
            }
        }
    }

    /// `-x` of an `f32`, `!c` of a condition.
    fn lower_unary(&mut self, u: &syn::ExprUnary) -> Option<Value> {
        let span = u.span();
        match u.op {
            syn::UnOp::Neg(_) => {
                let a = self.scalar(&u.expr)?;
                Some(Value::Scalar(self.b.call(Func::Neg, vec![a], span)))
            }
            syn::UnOp::Not(_) => {
                let a = self.boolean(&u.expr)?;
                Some(Value::Bool(self.b.not(a, span)))
            }
            _ => {
                self.error(
                    span,
                    "dereference is not supported: the language has no references",
                );
                None
            }
        }
    }

    /// `[a, b, c]` of `f32`s (every element's errors reported).
    fn lower_array_literal(&mut self, arr: &syn::ExprArray) -> Option<Value> {
        let span = arr.span();
        let mut elems = Vec::new();
        let mut ok = true;
        for el in &arr.elems {
            match self.scalar(el) {
                Some(v) => elems.push(v),
                None => ok = false,
            }
        }
        if arr.elems.is_empty() {
            self.error(span, "empty arrays are not supported");
            return None;
        }
        let n = elems.len();
        ok.then(|| Value::Array(self.b.array(elems, span), n))
    }

    /// `i as f32`: an integer to `f32`, the only conversion.
    fn lower_cast(&mut self, c: &syn::ExprCast) -> Option<Value> {
        let to_f32 = is_float(&c.ty);
        match self.lower_expr(&c.expr)? {
            Value::Int(v, ..) if to_f32 => {
                Some(Value::Scalar(self.b.push(Op::IntToF32(v), c.span(), None)))
            }
            Value::Int(..) => {
                self.error(
                    c.ty.span(),
                    "an integer converts to `f32` only (`i as f32`)",
                );
                None
            }
            _ => {
                self.error(
                    c.as_token.span,
                    "only an integer (a loop index) converts, and only to `f32` \
                     (`i as f32`): this value is already an `f32`, and array indices \
                     are integers computed from loop indices",
                );
                None
            }
        }
    }

    /// The value a block or an `if` ends with, or `missing` at `span` where it has none.
    fn tail_value(&mut self, tail: Tail, span: Span, missing: &str) -> Option<Value> {
        match tail {
            Tail::Value(v) => Some(v),
            Tail::Failed => None,
            Tail::Unit => {
                self.error(span, missing);
                None
            }
        }
    }

    /// `(a, [b, c])`: the result of a function returning a tuple, as one array of its
    /// words.
    fn lower_tuple(&mut self, t: &syn::ExprTuple) -> Option<Value> {
        let span = t.span();
        let Some(parts) = self.tuple_parts.clone() else {
            self.error(
                span,
                "tuples are supported only as the result of a function returning one",
            );
            return None;
        };
        if t.elems.len() != parts.len() {
            self.error(
                span,
                format!(
                    "the result is a tuple of {} parts, found {}",
                    parts.len(),
                    t.elems.len()
                ),
            );
            return None;
        }
        let mut words = Vec::new();
        let mut ok = true;
        for (e, p) in t.elems.iter().zip(&parts) {
            match (self.lower_expr(e), p) {
                (Some(Value::Scalar(v)), Shape::Scalar) => words.push(v),
                (Some(Value::Array(vs, m)), Shape::Array(n)) if m == *n => {
                    let vs = self.b.words_of(vs, span);
                    words.extend(vs)
                }
                (Some(v), p) => {
                    let want = Kind::Real(*p);
                    self.error(
                        e.span(),
                        format!("this part of the result must be {want}, found {}", v.kind()),
                    );
                    ok = false;
                }
                (None, _) => ok = false,
            }
        }
        let n = words.len();
        ok.then(|| Value::Array(self.b.array(words, span), n))
    }

    /// Reports an expression outside the language, with what to write instead (a `for`
    /// loop in value position is lowered first, so that its body's errors show too).
    fn reject_expr(&mut self, e: &syn::Expr) {
        use syn::Expr as E;
        let (span, message): (Span, String) = match e {
            E::ForLoop(f) => {
                self.lower_for(f);
                (
                    f.for_token.span,
                    "a `for` loop has no value: write it as a statement".into(),
                )
            }
            E::Break(b) => (
                b.break_token.span,
                "`break` is not supported: loops run their full range (`for i in A..B`)".into(),
            ),
            E::Continue(c) => (
                c.continue_token.span,
                "`continue` is not supported: wrap the rest of the body in an `if`".into(),
            ),
            E::While(w) => (w.while_token.span, "`while` loops are not supported".into()),
            E::Loop(l) => (l.loop_token.span, "`loop` is not supported".into()),
            E::Match(m) => (m.match_token.span, "`match` is not supported".into()),
            E::Closure(c) => (
                c.inputs_begin.span,
                "closures are not supported: write a separate #[differentiable] function".into(),
            ),
            E::Reference(r) => (
                r.and_token.span,
                "references are not supported: the language works with values".into(),
            ),
            E::Field(f) => (
                f.dot_token.span,
                "field access is not supported: structs and tuples are not part of the \
                 language"
                    .into(),
            ),
            E::Macro(m) => (
                m.mac.path.span(),
                "macros are not supported inside a differentiable body".into(),
            ),
            E::Unsafe(u) => (
                u.unsafe_token.span,
                "`unsafe` is not allowed in a differentiable function".into(),
            ),
            E::Return(r) => {
                self.saw_return = true;
                (
                    r.return_token.span,
                    "`return` is not supported: end the body with the result expression".into(),
                )
            }
            E::Assign(_) => (
                e.span(),
                "an assignment has no value: write it as a statement (`x = ...;`)".into(),
            ),
            _ => (
                e.span(),
                format!("this expression is not supported; {SUPPORTED}"),
            ),
        };
        self.error(span, message);
    }

    pub(super) fn lower_lit(&mut self, lit: &syn::Lit) -> Option<ValueId> {
        match lit {
            syn::Lit::Float(f) => {
                if !f.suffix().is_empty() && Precision::named(f.suffix()).is_none() {
                    self.error(
                        f.span(),
                        format!(
                            "`{}` literals are not supported: the language is f32 or f64 (write `1.0`, \
                             `1.0f32` or `1.0f64`)",
                            f.suffix()
                        ),
                    );
                    return None;
                }
                // The exact decimal value, so the f64 interpreter sees the number the user
                // wrote; f32 code rounds it the way rustc does.
                match f.base10_digits().parse::<f64>() {
                    Ok(v) => Some(self.b.constant(v, f.span())),
                    Err(e) => {
                        self.error(f.span(), format!("invalid float literal: {e}"));
                        None
                    }
                }
            }
            syn::Lit::Int(i) => {
                self.error(
                    i.span(),
                    format!(
                        "integer literal where an `f32` is expected: write `{}.0`",
                        i.base10_digits()
                    ),
                );
                None
            }
            syn::Lit::Bool(b) => {
                self.error(
                    b.span,
                    "`true`/`false` literals are not supported: write the condition itself \
                     (`x > 0.0`)",
                );
                None
            }
            other => {
                self.error(
                    other.span(),
                    "only float literals are supported in arithmetic",
                );
                None
            }
        }
    }

    pub(super) fn lower_binary(&mut self, bin: &syn::ExprBinary) -> Option<Value> {
        use syn::BinOp as B;
        let is_int_name = |name: &str| {
            self.lookup(name)
                .is_some_and(|id| matches!(self.vars[id].value, Some(Value::Int(..))))
        };
        if is_integer_expr(&bin.left, &is_int_name) || is_integer_expr(&bin.right, &is_int_name) {
            // Integer arithmetic on indices, or a comparison of them.
            if let Some(v) = self.lower_int_binary(bin) {
                return v;
            }
        }
        let func = match bin.op {
            B::Add(_) => Func::Add,
            B::Sub(_) => Func::Sub,
            B::Mul(_) => Func::Mul,
            B::Div(_) => Func::Div,
            op if is_compound_assign(&op) => {
                self.error(
                    op.span(),
                    "a compound assignment has no value: write it as a statement \
                     (`x += ...;`)",
                );
                return None;
            }
            B::Rem(t) => {
                self.error(
                    t.span,
                    "`%` is not supported; use `x - (x / m).floor() * m`",
                );
                return None;
            }
            B::Lt(_) | B::Le(_) | B::Gt(_) | B::Ge(_) | B::Eq(_) | B::Ne(_) => {
                let cmp = match bin.op {
                    B::Lt(_) => CmpOp::Lt,
                    B::Le(_) => CmpOp::Le,
                    B::Gt(_) => CmpOp::Gt,
                    B::Ge(_) => CmpOp::Ge,
                    B::Eq(_) => CmpOp::Eq,
                    _ => CmpOp::Ne,
                };
                let a = self.lower_expr(&bin.left);
                let b = self.lower_expr(&bin.right);
                let span = bin.op.span();
                return match (a?, b?) {
                    (Value::Int(a, ..), Value::Int(b, ..)) => {
                        Some(Value::Bool(self.b.cmp(cmp, a, b, span)))
                    }
                    (Value::Scalar(a), Value::Scalar(b)) => {
                        Some(Value::Bool(self.b.cmp(cmp, a, b, span)))
                    }
                    (a, b) => {
                        self.error(
                            span,
                            format!(
                                "comparisons take two `f32` values or two integers, found {} \
                                 and {}",
                                a.kind(),
                                b.kind()
                            ),
                        );
                        None
                    }
                };
            }
            B::And(_) | B::Or(_) => {
                let a = self.boolean(&bin.left);
                let b = self.boolean(&bin.right);
                let (a, b) = (a?, b?);
                let span = bin.op.span();
                return Some(Value::Bool(if matches!(bin.op, B::And(_)) {
                    self.b.and(a, b, span)
                } else {
                    self.b.or(a, b, span)
                }));
            }
            op => {
                self.error(
                    op.span(),
                    "bitwise and shift operators are not supported: the language is f32 \
                     arithmetic",
                );
                return None;
            }
        };
        let a = self.scalar(&bin.left);
        let b = self.scalar(&bin.right);
        Some(Value::Scalar(self.b.call(
            func,
            vec![a?, b?],
            bin.op.span(),
        )))
    }

    pub(super) fn lower_path(&mut self, p: &syn::ExprPath) -> Option<Value> {
        let span = p.span();
        if p.qself.is_none()
            && let Some(ident) = p.path.get_ident()
        {
            let name = ident.to_string();
            if let Some(id) = self.lookup(&name) {
                return self.vars[id].value.clone();
            }
            if self.failed_names.contains(&name) {
                // Its declaration was reported; every read of it would repeat that.
                return None;
            }
            self.error(
                span,
                format!(
                    "cannot find `{name}` here: a differentiable body sees its arguments and \
                     its own `let` bindings (and `std::f32::consts`)"
                ),
            );
            return None;
        }
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let last = segs.last().cloned().unwrap_or_default();
        let prefix: Vec<&str> = segs[..segs.len().saturating_sub(1)]
            .iter()
            .map(String::as_str)
            .collect();
        let is_consts = matches!(prefix.as_slice(), ["std" | "core", ty, "consts"] if Precision::named(ty).is_some());
        if is_consts && let Some((_, v)) = CONSTS.iter().find(|(n, _)| *n == last) {
            return Some(Value::Scalar(self.b.constant(*v, span)));
        }
        self.error(
            span,
            "paths other than local names and `std::f32::consts::*` are not supported; \
             constants and statics from outside the function cannot be differentiated \
             through: pass them as arguments",
        );
        None
    }

    pub(super) fn lower_index(&mut self, ix: &syn::ExprIndex) -> Option<Value> {
        let base = self.lower_expr(&ix.expr);
        let index = self.index_value(&ix.index);
        let (base, index) = (base?, index?);
        let Value::Array(array, len) = base else {
            self.error(
                ix.expr.span(),
                format!("only arrays can be indexed; this is {}", base.kind()),
            );
            return None;
        };
        let index = match self.check_index(&ix.index, index, len)? {
            Index::Const(k) => self.b.int(k as i64, ix.span()),
            Index::Dynamic(v) => v,
        };
        Some(Value::Scalar(self.b.push(
            Op::ArrayGet { array, index },
            ix.span(),
            None,
        )))
    }

    /// An array index: an integer expression.
    pub(super) fn index_value(&mut self, e: &syn::Expr) -> Option<(ValueId, i64, i64)> {
        self.integer_for(
            e,
            "array indices are integers (a literal, a `const`, a loop index, or `+ - *` of \
             those)",
        )
    }

    /// An index proven in range for an array of `len`, or an error saying which values
    /// fall outside: out-of-range indices never reach the GPU.
    pub(super) fn check_index(
        &mut self,
        e: &syn::Expr,
        (v, lo, hi): (ValueId, i64, i64),
        len: usize,
    ) -> Option<Index> {
        let len = len as i64;
        if lo == hi && (0..len).contains(&lo) {
            return Some(Index::Const(lo as usize));
        }
        if lo == hi {
            self.error(
                e.span(),
                format!("index {lo} is out of range for an array of length {len}"),
            );
            return None;
        }
        if lo < 0 || hi >= len {
            self.error(
                e.span(),
                format!(
                    "this index takes the values {lo}..={hi}, out of range for an array of \
                     length {len}: gradfuse proves indices in range at compile time"
                ),
            );
            return None;
        }
        Some(Index::Dynamic(v))
    }

    /// `+ - *` of two integers, or a comparison; `None` if an operand is not an integer
    /// (the caller reports it as f32 arithmetic).
    pub(super) fn lower_int_binary(&mut self, bin: &syn::ExprBinary) -> Option<Option<Value>> {
        use syn::BinOp as B;
        let op = match bin.op {
            B::Add(_) => IntOp::Add,
            B::Sub(_) => IntOp::Sub,
            B::Mul(_) => IntOp::Mul,
            _ => return None,
        };
        let a = self.lower_expr(&bin.left);
        let b = self.lower_expr(&bin.right);
        let (Some(Value::Int(a, alo, ahi)), Some(Value::Int(b, blo, bhi))) = (&a, &b) else {
            if let (Some(a), Some(b)) = (&a, &b) {
                self.error(
                    bin.op.span(),
                    format!(
                        "integer arithmetic needs two integers, found {} and {}: convert a \
                         loop index with `as f32`, and write float literals with a `.0`",
                        a.kind(),
                        b.kind()
                    ),
                );
            }
            return Some(None);
        };
        let corners = [
            op.apply(*alo, *blo),
            op.apply(*alo, *bhi),
            op.apply(*ahi, *blo),
            op.apply(*ahi, *bhi),
        ];
        let (lo, hi) = (
            corners.iter().copied().min().unwrap_or(0),
            corners.iter().copied().max().unwrap_or(0),
        );
        let v = if lo == hi {
            self.b.int(lo, bin.op.span())
        } else {
            self.b.push(Op::IntBin(op, *a, *b), bin.op.span(), None)
        };
        Some(Some(Value::Int(v, lo, hi)))
    }
}

/// A checked array index.
pub(super) enum Index {
    Const(usize),
    Dynamic(ValueId),
}
