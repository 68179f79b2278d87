//! `for` loops: carried values, captures, and the loop node.

use super::syntax::assigned_names;
use super::*;

/// What the `for` line says: the index's name (`None` for `_`) and the constant bounds
/// `start..end` (`None` where they are not constant: reported).
struct LoopHeader {
    index_name: Option<String>,
    bounds: Option<(i64, i64)>,
}

impl Lowerer {
    /// `for i in A..B { ... }` (or `A..=B`): a loop that stays a loop. Variables of the
    /// enclosing scopes assigned in the body are carried from one iteration to the next;
    /// the others are captured.
    pub(super) fn lower_for(&mut self, f: &syn::ExprForLoop) {
        let Some(LoopHeader { index_name, bounds }) = self.loop_header(f) else {
            return;
        };
        let Some((start, end)) = bounds else {
            // Still check the body for its own errors, without a loop to build.
            self.check_body_alone(f, index_name.as_deref());
            return;
        };
        let span = f.for_token.span;
        let Some((visible, carried)) = self.loop_variables(f, span) else {
            return;
        };
        // The body's inputs: the index, the carried values (flattened), the captures.
        let before: Vec<Option<Value>> = self.vars.iter().map(|v| v.value.clone()).collect();
        let outer = std::mem::replace(&mut self.b, Builder::new(0));
        let index = self.b.add_input(Ty::Int, span, index_name.clone());
        let mut init: Vec<ValueId> = Vec::new();
        let body_value = |b: &mut Builder, v: &Value, outer_ids: &mut Vec<ValueId>| -> Value {
            let mut one = |x: ValueId, ty: Ty| {
                outer_ids.push(x);
                b.add_input(ty, span, None)
            };
            match v {
                Value::Scalar(x) => Value::Scalar(one(*x, Ty::F32)),
                Value::Bool(x) => Value::Bool(one(*x, Ty::Bool)),
                Value::Int(x, lo, hi) => Value::Int(one(*x, Ty::Int), *lo, *hi),
                Value::Array(x, n) => Value::Array(one(*x, Ty::Array(*n as u32)), *n),
            }
        };
        for id in &carried {
            if let Some(v) = before[*id].clone() {
                let bv = body_value(&mut self.b, &v, &mut init);
                let name = self.vars[*id].name.clone();
                self.name_value(&bv, &name);
                self.vars[*id].value = Some(bv);
            }
        }
        let mut captures: Vec<ValueId> = Vec::new();
        for id in &visible {
            if carried.contains(id) {
                continue;
            }
            if let Some(v) = before[*id].clone() {
                let bv = match &v {
                    // Constants stay constants: no input for them.
                    Value::Int(x, lo, hi) if lo == hi => {
                        let _ = x;
                        Value::Int(self.b.int(*lo, span), *lo, *hi)
                    }
                    _ => body_value(&mut self.b, &v, &mut captures),
                };
                let name = self.vars[*id].name.clone();
                self.name_value(&bv, &name);
                self.vars[*id].value = Some(bv);
            }
        }
        let n_vars = self.vars.len();
        self.scopes.push(HashMap::new());
        if let Some(n) = index_name {
            self.declare(
                n,
                Some(Value::Int(index, start, (end - 1).max(start))),
                false,
            );
        }
        let tail = self.lower_block(&f.body);
        self.scopes.pop();
        if let Tail::Value(_) = tail {
            self.error(
                f.body.span(),
                "a loop body ends with a statement: add `;` after its last expression",
            );
        }
        // The carried values after an iteration: the body's outputs.
        let mut outputs = Vec::new();
        let mut ok = !matches!(tail, Tail::Failed);
        for id in &carried {
            match &self.vars[*id].value {
                Some(Value::Scalar(x)) | Some(Value::Bool(x)) | Some(Value::Array(x, _)) => {
                    outputs.push(*x)
                }
                _ => ok = false,
            }
        }
        self.vars.truncate(n_vars);
        let body = std::mem::replace(&mut self.b, outer).finish(outputs);
        for (var, v) in self.vars.iter_mut().zip(&before) {
            var.value = v.clone();
        }
        if !ok {
            for id in &carried {
                self.vars[*id].value = None;
            }
            return;
        }
        let (body, kept) = without_unread_captures(body, init.len(), &captures);
        let node = self.b.push(
            Op::Loop(Box::new(Loop {
                start,
                end: end.max(start),
                init,
                captures: kept,
                body,
                kind: LoopKind::Forward,
            })),
            span,
            None,
        );
        self.bind_loop_results(node, &carried, span);
    }

    /// The loop's header; `None` for a pattern that is not a name (reported).
    fn loop_header(&mut self, f: &syn::ExprForLoop) -> Option<LoopHeader> {
        if let Some(label) = &f.label {
            self.error(label.name.span(), "loop labels are not supported");
        }
        let index_name = match &*f.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                Some(pi.ident.to_string())
            }
            syn::Pat::Wild(_) => None,
            other => {
                self.error(
                    other.span(),
                    "the loop variable must be a name (`for i in 0..8`)",
                );
                return None;
            }
        };
        let bounds = match &*f.expr {
            syn::Expr::Range(r) => match (&r.start, &r.end) {
                (Some(a), Some(b)) => {
                    let a = self.constant_integer(a, "a loop's start");
                    let b = self.constant_integer(b, "a loop's end");
                    let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
                    a.zip(b)
                        .map(|(a, b)| (a, if inclusive { b + 1 } else { b }))
                }
                _ => {
                    self.error(r.span(), "a loop's range needs both ends: `for i in 0..8`");
                    None
                }
            },
            other => {
                self.error(
                    other.span(),
                    "loops run over a range with constant ends (`for i in 0..8` or \
                     `0..=7`); iterators, `.rev()` and `.step_by()` are not supported",
                );
                None
            }
        };
        Some(LoopHeader { index_name, bounds })
    }

    /// Lowers the body of a loop that cannot be built, for its own diagnostics only.
    fn check_body_alone(&mut self, f: &syn::ExprForLoop, index_name: Option<&str>) {
        let before = self.vars.len();
        self.scopes.push(HashMap::new());
        if let Some(n) = index_name {
            self.declare(n.to_string(), None, false);
        }
        let _ = self.lower_block(&f.body);
        self.scopes.pop();
        self.vars.truncate(before);
    }

    /// The variables the body sees (`visible`, by id) and those of them it assigns
    /// (`carried`); `None` (reported) if an integer variable would be carried.
    fn loop_variables(
        &mut self,
        f: &syn::ExprForLoop,
        span: Span,
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        // The variables in scope, and which of them the body assigns.
        let assigned = assigned_names(&f.body);
        let visible: Vec<usize> = {
            let mut v: Vec<usize> = self
                .scopes
                .iter()
                .flat_map(|s| s.values().copied())
                .collect();
            v.sort();
            v.dedup();
            v.retain(|id| self.lookup(&self.vars[*id].name) == Some(*id));
            v
        };
        let carried: Vec<usize> = visible
            .iter()
            .copied()
            .filter(|id| assigned.contains(&self.vars[*id].name) && self.vars[*id].mutable)
            .filter(|id| self.vars[*id].value.is_some())
            .collect();
        for id in &carried {
            if let Some(Value::Int(..)) = self.vars[*id].value {
                let name = self.vars[*id].name.clone();
                self.error(
                    span,
                    format!(
                        "`{name}` is an integer changed in the loop: integers other than loop \
                         indices are not supported"
                    ),
                );
                return None;
            }
        }
        Some((visible, carried))
    }

    /// Binds each carried variable to its value after the loop (`node`'s results).
    fn bind_loop_results(&mut self, node: ValueId, carried: &[usize], span: Span) {
        let mut k = 0u32;
        for id in carried {
            let mut next = |b: &mut Builder| {
                k += 1;
                b.push(Op::Result(node, k - 1), span, None)
            };
            let after = match self.vars[*id].value.clone() {
                Some(Value::Scalar(_)) => Some(Value::Scalar(next(&mut self.b))),
                Some(Value::Bool(_)) => Some(Value::Bool(next(&mut self.b))),
                Some(Value::Array(_, n)) => Some(Value::Array(next(&mut self.b), n)),
                _ => None,
            };
            if let Some(v) = &after {
                let name = self.vars[*id].name.clone();
                self.name_value(v, &name);
            }
            self.vars[*id].value = after;
        }
    }
}

/// The body without the capture inputs it does not read, and the outer values of the
/// captures it keeps. Its inputs are `[i, carried (c words)..., captures...]`.
fn without_unread_captures(
    body: Function,
    c: usize,
    captures: &[ValueId],
) -> (Function, Vec<ValueId>) {
    let used = body.used_inputs();
    let mut keep = vec![true; 1 + c];
    keep.extend(used[1 + c..].iter().copied());
    let kept: Vec<ValueId> = captures
        .iter()
        .zip(&used[1 + c..])
        .filter(|(_, u)| **u)
        .map(|(v, _)| *v)
        .collect();
    (body.without_inputs(&keep), kept)
}
