//! The user's signature as the compiler sees it: parameters, their shapes and roles, and
//! the result. Lowering builds it; the buffer layout (`abi`) and the Rust emitter
//! read it.

/// The shape of an argument or a result: a scalar or an array of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// `f32`.
    Scalar,
    /// `[f32; N]`.
    Array(usize),
}

/// One parameter of a differentiable function.
#[derive(Clone, Debug)]
pub struct Param {
    /// Its name.
    pub name: syn::Ident,
    /// Its shape.
    pub kind: Shape,
    /// Declared `mut x: f32`: the body may assign to it.
    pub mutable: bool,
    /// Marked `#[constant]`: per-element data without a gradient.
    pub constant: bool,
    /// Marked `#[shared]`: one value for the whole batch, its gradient summed over it.
    pub shared: bool,
}

/// What the emitters need to know of the user's signature.
#[derive(Clone, Debug)]
pub struct Signature {
    /// The function's name.
    pub name: syn::Ident,
    /// Its visibility, given to the generated module too.
    pub vis: syn::Visibility,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// Its result: `f32`, or `[f32; M]` (a vector function, with a Jacobian); a tuple
    /// result is `[f32; M]` of all its words, with its parts in `result_parts`.
    pub result: Shape,
    /// The parts of a tuple result (`(f32, [f32; 3])`), in order.
    pub result_parts: Option<Vec<Shape>>,
}

impl Shape {
    /// How many scalar words it holds.
    pub fn words(self) -> usize {
        match self {
            Shape::Scalar => 1,
            Shape::Array(n) => n,
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Scalar => write!(f, "`f32`"),
            Shape::Array(n) => write!(f, "`[f32; {n}]`"),
        }
    }
}
