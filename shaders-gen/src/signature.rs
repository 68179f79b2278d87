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

/// The float type a function is written over: its arguments, locals, literals and result,
/// and so its CPU versions, its kernels and their buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// `f32`: every adapter runs it.
    #[default]
    F32,
    /// `f64`: kernels need the adapter's `SHADER_F64` feature.
    F64,
}

impl Precision {
    /// The type's name in Rust and WGSL.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The precision a type name (`f32`, `f64`) or literal suffix names, if any.
    pub fn named(name: &str) -> Option<Precision> {
        [Precision::F32, Precision::F64]
            .into_iter()
            .find(|p| p.name() == name)
    }

    /// The type of a float method called through it (`f32::sin` in `f32::sin(x)`, which
    /// is `x.sin()`): a path of two segments whose first names a precision.
    pub fn of_method_path(path: &syn::Path) -> Option<Precision> {
        match path.segments.len() {
            2 => Precision::named(&path.segments[0].ident.to_string()),
            _ => None,
        }
    }

    /// The other precision.
    pub fn other(self) -> Precision {
        match self {
            Precision::F32 => Precision::F64,
            Precision::F64 => Precision::F32,
        }
    }

    /// 4-byte words per scalar: the runtime moves 4-byte words, so an f64 is two.
    pub fn words_per_scalar(self) -> u32 {
        match self {
            Precision::F32 => 1,
            Precision::F64 => 2,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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
    /// The float type it is written over.
    pub precision: Precision,
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
