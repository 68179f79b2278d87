//! The one way lowering reports a problem: every check pushes a spanned error into a
//! [`Diagnostics`], and lowering returns them all together, so a user sees every mistake
//! of a function in one build. Helpers that find at most one problem return
//! `Result<_, syn::Error>` instead, and their caller either reports it or, visibly, replaces
//! it with a better message.

use proc_macro2::Span;

/// The spanned errors found so far.
#[derive(Default)]
#[must_use = "errors must be returned with `finish`"]
pub struct Diagnostics {
    errors: Vec<syn::Error>,
}

impl Diagnostics {
    /// Reports `msg` at `span`.
    pub fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, msg));
    }

    /// Reports an error built elsewhere (a literal that does not parse, a helper's).
    pub fn push(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    /// The value, or `None` with its error reported.
    pub fn report<T>(&mut self, result: Result<T, syn::Error>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    /// Whether anything was reported, and forgets it: for checks whose errors are
    /// reported elsewhere (a callee's signature, lowered again where it is defined).
    pub fn dismiss(mut self) -> bool {
        !std::mem::take(&mut self.errors).is_empty()
    }

    /// `value` if nothing was reported, else every error. A `None` value with no error
    /// reported is a bug in lowering: it would leave the user with no message at all.
    pub fn finish<T>(mut self, value: Option<T>) -> Result<T, Vec<syn::Error>> {
        let errors = std::mem::take(&mut self.errors);
        match value {
            Some(v) if errors.is_empty() => Ok(v),
            _ => {
                debug_assert!(!errors.is_empty(), "lowering failed without a diagnostic");
                Err(errors)
            }
        }
    }
}

impl Drop for Diagnostics {
    fn drop(&mut self) {
        // Dropping reported errors would compile a wrong function silently.
        debug_assert!(
            self.errors.is_empty() || std::thread::panicking(),
            "{} diagnostics dropped without `finish`",
            self.errors.len()
        );
    }
}
