//! Calls: f32 methods, prelude functions, inlined `#[differentiable]` callees and custom derivatives.

use super::*;

impl Lowerer {
    pub(super) fn lower_method(&mut self, mc: &syn::ExprMethodCall) -> Option<Value> {
        let name = mc.method.to_string();
        let mspan = mc.method.span();
        if let Some(t) = &mc.turbofish {
            self.error(t.span(), "generic arguments on methods are not supported");
            return None;
        }
        let Some(info) = ops::method(&name) else {
            // Still check the receiver, for its own errors.
            let _ = self.lower_expr(&mc.receiver);
            self.error(
                mspan,
                unsupported_method(&name, format!("method `{name}`"), "f32"),
            );
            return None;
        };
        let args: Vec<&syn::Expr> = std::iter::once(&*mc.receiver).chain(&mc.args).collect();
        self.lower_known_call(info, &args, mspan, mc.paren_token.span.join())
    }

    pub(super) fn lower_call(&mut self, call: &syn::ExprCall) -> Option<Value> {
        // `f32::sin(x)` (or `f64::sin(x)`) is the same as `x.sin()`.
        if let syn::Expr::Path(p) = &*call.func
            && p.qself.is_none()
            && let Some(ty) = Precision::of_method_path(&p.path)
        {
            let name = p.path.segments[1].ident.to_string();
            let span = p.path.segments[1].ident.span();
            let Some(info) = ops::method(&name) else {
                let called = format!("function `{ty}::{name}`");
                self.error(span, unsupported_method(&name, called, &ty.to_string()));
                return None;
            };
            let args: Vec<&syn::Expr> = call.args.iter().collect();
            return self.lower_known_call(info, &args, span, call.paren_token.span.join());
        }
        if let syn::Expr::Path(p) = &*call.func
            && p.qself.is_none()
        {
            let name = crate::compose::callee_name(&p.path);
            if self.inlining.contains(&name) {
                self.error(
                    call.func.span(),
                    format!(
                        "recursion is not supported: `{name}` calls itself (directly or \
                         through other functions)"
                    ),
                );
                return None;
            }
            if let Some(callee) = self.library.iter().find(|f| f.sig.ident == name).cloned() {
                return self.inline_call(&callee, call);
            }
        }
        self.error(
            call.func.span(),
            "only `#[differentiable]` functions (and `f32::` methods) can be called here",
        );
        None
    }

    /// A call to a differentiable function: its body lowered in place, in a scope of its
    /// own holding its parameters bound to the arguments.
    pub(super) fn inline_call(
        &mut self,
        callee: &syn::ItemFn,
        call: &syn::ExprCall,
    ) -> Option<Value> {
        let name = callee.sig.ident.to_string();
        let mut callee_diag = Diagnostics::default();
        let sig = lower_signature(&callee.sig, &mut callee_diag);
        if callee_diag.dismiss() {
            // The callee reports these itself.
            return None;
        }
        if sig.result_parts.is_some() {
            self.error(
                call.func.span(),
                format!("`{name}` returns a tuple: calls to functions with tuple results are not supported (return an array)"),
            );
            return None;
        }
        if call.args.len() != sig.params.len() {
            self.error(
                call.paren_token.span.join(),
                format!(
                    "`{name}` takes {} arguments, found {}",
                    sig.params.len(),
                    call.args.len()
                ),
            );
            return None;
        }
        let mut values = Vec::new();
        for (arg, p) in call.args.iter().zip(&sig.params) {
            let v = self.lower_expr(arg)?;
            let want = Kind::Real(p.kind);
            if v.kind() != want {
                self.error(
                    arg.span(),
                    format!("`{name}` takes {want} for `{}`, found {}", p.name, v.kind()),
                );
                return None;
            }
            values.push(v);
        }
        let value = self.inline_body(callee, &sig, values.clone())?;
        match (crate::compose::custom_grad(callee), value) {
            (Some(_), Value::Scalar(v)) => self
                .custom_grad(callee, &sig.params, &values, v, call.func.span())
                .map(Value::Scalar),
            (_, value) => Some(value),
        }
    }

    /// `d value / d (the non-constant arguments)` given by the function named in `item`'s
    /// `grad = ...`, lowered with the same arguments: the result is `value` with those
    /// partials ([`Op::CustomGrad`]).
    pub(super) fn custom_grad(
        &mut self,
        item: &syn::ItemFn,
        params: &[Param],
        values: &[Value],
        value: ValueId,
        span: Span,
    ) -> Option<ValueId> {
        let path = crate::compose::custom_grad(item)?;
        let name = crate::compose::callee_name(&path);
        let Some(grad) = self.library.iter().find(|f| f.sig.ident == name).cloned() else {
            self.error(
                path.span(),
                format!("`{name}` must be a `#[differentiable]` function"),
            );
            return None;
        };
        // Its own errors are reported where it is defined; here it is only the wrong
        // derivative.
        let mut grad_diag = Diagnostics::default();
        let gsig = lower_signature(&grad.sig, &mut grad_diag);
        let grad_failed = grad_diag.dismiss();
        let same = gsig.params.len() == params.len()
            && gsig
                .params
                .iter()
                .zip(params)
                .all(|(a, b)| a.kind == b.kind);
        let (args, words): (Vec<ValueId>, usize) = {
            let mut args = Vec::new();
            for (p, v) in params.iter().zip(values) {
                if p.constant {
                    continue;
                }
                match v {
                    Value::Scalar(x) => args.push(*x),
                    Value::Array(xs, _) => {
                        let words = self.b.words_of(*xs, span);
                        args.extend(words)
                    }
                    _ => {}
                }
            }
            let n = args.len();
            (args, n)
        };
        let expected = if words == 1 {
            Shape::Scalar
        } else {
            Shape::Array(words)
        };
        if grad_failed
            || !same
            || !(gsig.result == expected || gsig.result == Shape::Array(1) && words == 1)
        {
            self.error(
                path.span(),
                format!(
                    "the custom derivative `{name}` must take the same arguments as `{}` and \
                     return its {words} derivative word{} (the arguments' words in order, \
                     `#[constant]` ones left out): {}",
                    item.sig.ident,
                    if words == 1 { "" } else { "s" },
                    if words == 1 {
                        "`-> f32`".to_string()
                    } else {
                        format!("`-> [f32; {words}]`")
                    }
                ),
            );
            return None;
        }
        if self.inlining.contains(&name) {
            self.error(path.span(), format!("recursion is not supported: `{name}`"));
            return None;
        }
        self.inlining.push(name);
        let partials = self.inline_body(&grad, &gsig, values.to_vec());
        self.inlining.pop();
        let partials = match partials? {
            Value::Scalar(p) => vec![p],
            Value::Array(ps, _) => self.b.words_of(ps, span),
            _ => return None,
        };
        Some(self.b.push(
            Op::CustomGrad {
                value,
                args,
                partials,
            },
            span,
            None,
        ))
    }

    /// A function's body lowered with its parameters bound to `values`, in scopes of its
    /// own.
    pub(super) fn inline_body(
        &mut self,
        callee: &syn::ItemFn,
        sig: &Signature,
        values: Vec<Value>,
    ) -> Option<Value> {
        let name = callee.sig.ident.to_string();
        let result = Kind::Real(sig.result);
        let saved_scopes = std::mem::replace(&mut self.scopes, vec![HashMap::new()]);
        let saved_vars = self.vars.len();
        let saved_result = self.result.replace(result);
        for (p, v) in sig.params.iter().zip(values) {
            self.declare(p.name.to_string(), Some(v), p.mutable);
        }
        self.inlining.push(name);
        let tail = self.lower_block(&callee.block);
        self.inlining.pop();
        self.result = saved_result;
        self.scopes = saved_scopes;
        self.vars.truncate(saved_vars);
        match tail {
            Tail::Value(v) if v.kind() == result => Some(v),
            _ => None,
        }
    }

    pub(super) fn lower_known_call(
        &mut self,
        info: &ops::MethodInfo,
        args: &[&syn::Expr],
        span: Span,
        args_span: Span,
    ) -> Option<Value> {
        if args.len() != info.arity {
            let n = info.arity - 1;
            self.error(
                args_span,
                format!(
                    "`{}` takes {n} argument{} besides its receiver, found {}",
                    info.name,
                    if n == 1 { "" } else { "s" },
                    args.len().saturating_sub(1)
                ),
            );
            return None;
        }
        if let Func::Powi(_) = info.func {
            let x = self.scalar(args[0]);
            let n = self.int_literal(args[1]);
            return Some(Value::Scalar(self.b.call(Func::Powi(n?), vec![x?], span)));
        }
        let mut vals = Vec::new();
        let mut ok = true;
        for a in args {
            match self.scalar(a) {
                Some(v) => vals.push(v),
                None => ok = false,
            }
        }
        ok.then(|| Value::Scalar(self.b.call(info.func, vals, span)))
    }

    /// The exponent of `powi`: an integer literal, maybe negated.
    pub(super) fn int_literal(&mut self, e: &syn::Expr) -> Option<i32> {
        match e {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => match i.base10_parse::<i32>() {
                Ok(v) => Some(v),
                Err(e) => {
                    self.diag.push(e);
                    None
                }
            },
            syn::Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Neg(_),
                expr,
                ..
            }) => self.int_literal(expr).map(|v| -v),
            syn::Expr::Paren(p) => self.int_literal(&p.expr),
            syn::Expr::Group(g) => self.int_literal(&g.expr),
            other => {
                self.error(
                    other.span(),
                    "the exponent of `powi` must be an integer literal; use `powf` for a \
                     computed exponent",
                );
                None
            }
        }
    }
}

/// The message for a call of `name`, which the ops table lacks, written as `called`
/// (``method `foo` `` or ``function `f32::foo` ``) on `ty` values. `sin_cos` is known, but
/// only where a tuple `let` binds its pair: the message says so.
fn unsupported_method(name: &str, called: String, ty: &str) -> String {
    if name == "sin_cos" {
        return "`sin_cos` gives a pair, bound only by `let (s, c) = x.sin_cos();` (or call \
                `sin` and `cos`)"
            .to_string();
    }
    format!(
        "unsupported {called}; the supported {ty} methods are: {}",
        ops::method_names()
    )
}
