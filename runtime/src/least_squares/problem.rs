//! Building a [`Problem`]: parameter blocks, rows held constant, and residual terms whose
//! arguments are bound to the blocks. Every binding is checked here, before any solve.

use super::ops::MAX_ROW_WORDS;
use super::{Loss, Residuals};
use crate::buffer::{Buffer, RawBuffer, words_per};
use crate::device::Device;
use crate::error::Error;
use crate::gather::Index;
use crate::products::MAX_COLUMN_BLOCKS;
use crate::recording::Recording;
use std::sync::Arc;

/// A parameter block of a [`Problem`], as [`Problem::add_block`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockId(pub(crate) usize);

/// A parameter block: the user's buffer of rows, and which rows are held constant.
pub(crate) struct BlockEntry {
    pub(crate) raw: Arc<RawBuffer>,
    pub(crate) rows: usize,
    pub(crate) words: u32,
    pub(crate) held: Vec<bool>,
}

/// One argument of a term with a derivative: its block, width, and index (`None`: one
/// block row per residual).
#[derive(Clone)]
pub(crate) struct TermArgument {
    pub(crate) block: usize,
    pub(crate) words: u32,
    pub(crate) index: Option<Index>,
}

/// A residual term: its kernel and bindings (type-erased), shape and loss.
pub(crate) struct TermEntry<'b> {
    pub(crate) launches: Box<dyn TermLaunches + 'b>,
    pub(crate) n: usize,
    pub(crate) rows: usize,
    pub(crate) arguments: Vec<TermArgument>,
    pub(crate) loss: Loss,
}

impl TermEntry<'_> {
    /// Jacobian columns per residual.
    pub(crate) fn columns(&self) -> usize {
        self.arguments.iter().map(|a| a.words as usize).sum()
    }
}

/// The launches of a term, its kernel and sources bound.
pub(crate) trait TermLaunches {
    fn values(&self, rec: &mut Recording<'_>, values: &Buffer<f32>) -> Result<(), Error>;
    fn jacobians(
        &self,
        rec: &mut Recording<'_>,
        values: &Buffer<f32>,
        jacobians: &Buffer<f32>,
    ) -> Result<(), Error>;
}

struct Bound<'b, K: Residuals> {
    kernel: K,
    sources: K::Sources<'b>,
}

impl<K: Residuals> TermLaunches for Bound<'_, K> {
    fn values(&self, rec: &mut Recording<'_>, values: &Buffer<f32>) -> Result<(), Error> {
        self.kernel.record_values(rec, &self.sources, values)
    }

    fn jacobians(
        &self,
        rec: &mut Recording<'_>,
        values: &Buffer<f32>,
        jacobians: &Buffer<f32>,
    ) -> Result<(), Error> {
        self.kernel
            .record_jacobians(rec, &self.sources, values, jacobians)
    }
}

/// A nonlinear least-squares problem on one device: minimize `½ Σ_terms Σ_k ρ(|r_k|²)`
/// over the rows of its parameter blocks. The blocks are the user's buffers, updated in
/// place by a solve; terms borrow them (and their indices) for the problem's life.
pub struct Problem<'b> {
    pub(crate) device: &'b Device,
    pub(crate) blocks: Vec<BlockEntry>,
    pub(crate) terms: Vec<TermEntry<'b>>,
}

impl std::fmt::Debug for Problem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Problem")
            .field("blocks", &self.blocks.len())
            .field("unknowns", &self.unknowns())
            .field("terms", &self.terms.len())
            .field("residuals", &self.residuals())
            .finish()
    }
}

impl<'b> Problem<'b> {
    /// An empty problem on `device`.
    pub fn new(device: &'b Device) -> Problem<'b> {
        Problem {
            device,
            blocks: Vec::new(),
            terms: Vec::new(),
        }
    }

    /// Adds a parameter block: the rows of `block` (each `T`, an `f32` or `[f32; W]` with
    /// `W` up to [`MAX_ROW_WORDS`]) become unknowns, solved in place.
    pub fn add_block<T: bytemuck::Pod>(&mut self, block: &'b Buffer<T>) -> Result<BlockId, Error> {
        let words = words_per::<T>()?;
        if words > MAX_ROW_WORDS {
            return Err(Error::Unsupported(format!(
                "a parameter block's rows have at most {MAX_ROW_WORDS} words; {} has {words}",
                std::any::type_name::<T>()
            )));
        }
        self.device.check_owns(block.raw(), "a parameter block")?;
        if let Some(b) = self.blocks.iter().position(|b| b.raw.id == block.raw().id) {
            return Err(Error::Aliased(format!(
                "this buffer is already parameter block {b} of the problem"
            )));
        }
        self.blocks.push(BlockEntry {
            raw: block.raw().clone(),
            rows: block.len(),
            words: words as u32,
            held: vec![false; block.len()],
        });
        Ok(BlockId(self.blocks.len() - 1))
    }

    /// Holds rows of a block constant (a gauge: a vertex, a camera): a solve leaves them
    /// as they are.
    pub fn hold_rows(&mut self, block: BlockId, rows: &[u32]) -> Result<(), Error> {
        let b = self.block_mut(block)?;
        let count = b.rows;
        for (entry, &r) in rows.iter().enumerate() {
            let row = r as usize;
            let flag = b.held.get_mut(row).ok_or(Error::IndexOutOfRange {
                entry,
                row,
                rows: count,
            })?;
            *flag = true;
        }
        Ok(())
    }

    /// Holds a whole block constant.
    pub fn hold_block(&mut self, block: BlockId) -> Result<(), Error> {
        self.block_mut(block)?.held.fill(true);
        Ok(())
    }

    /// Adds a residual term: `kernel`'s residuals of every element, its arguments read as
    /// `sources` binds them, each with a derivative bound to a parameter block of this
    /// problem (`Source::Gather` of a block through an index, or `Source::Each` of a block
    /// with one row per element). Arguments without one (`#[constant]`) take any buffer.
    pub fn add_term<K: Residuals + 'b>(
        &mut self,
        kernel: K,
        sources: K::Sources<'b>,
        loss: Loss,
    ) -> Result<(), Error> {
        check_loss(loss)?;
        let found = K::arguments(&sources);
        if found.is_empty() || found.len() > MAX_COLUMN_BLOCKS {
            return Err(Error::Unsupported(format!(
                "a residual term has 1 to {MAX_COLUMN_BLOCKS} arguments with a derivative; \
                 this one has {}",
                found.len()
            )));
        }
        let n = match found[0].source {
            (_, Some(i)) => i.len(),
            (b, None) => b.words / found[0].words as usize,
        };
        let mut arguments = Vec::new();
        for a in &found {
            arguments.push(self.bind_argument(a, n)?);
        }
        self.terms.push(TermEntry {
            launches: Box::new(Bound { kernel, sources }),
            n,
            rows: K::RESULT_WORDS,
            arguments,
            loss,
        });
        Ok(())
    }

    /// The block and index of an argument with a derivative, or why it cannot be one.
    fn bind_argument(
        &self,
        a: &super::ResidualArgument<'_>,
        n: usize,
    ) -> Result<TermArgument, Error> {
        let (buffer, index) = a.source;
        let Some(block) = self.blocks.iter().position(|b| b.raw.id == buffer.id) else {
            return Err(Error::Unsupported(format!(
                "argument `{}` has a derivative but reads a buffer that is no parameter block \
                 of this problem: add the buffer with `add_block` (and `hold_block` to keep it \
                 fixed), or make the argument #[constant]",
                a.name
            )));
        };
        let b = &self.blocks[block];
        if b.words != a.words {
            return Err(Error::ShapeMismatch {
                what: format!(
                    "argument `{}`: words of a row of parameter block {block}",
                    a.name
                ),
                expected: a.words as usize,
                got: b.words as usize,
            });
        }
        let rows = index.map_or(n, Index::rows);
        crate::error::mismatch(
            format!("argument `{}`: rows of parameter block {block}", a.name),
            rows,
            b.rows,
        )?;
        if let Some(i) = index {
            crate::error::mismatch(format!("argument `{}`: index entries", a.name), n, i.len())?;
        }
        Ok(TermArgument {
            block,
            words: a.words,
            index: index.cloned(),
        })
    }

    fn block_mut(&mut self, block: BlockId) -> Result<&mut BlockEntry, Error> {
        let count = self.blocks.len();
        self.blocks.get_mut(block.0).ok_or(Error::IndexOutOfRange {
            entry: 0,
            row: block.0,
            rows: count,
        })
    }

    /// Unknowns: the words of every row not held constant.
    pub fn unknowns(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.held.iter().filter(|h| !**h).count() * b.words as usize)
            .sum()
    }

    /// Residual words over every term.
    pub fn residuals(&self) -> usize {
        self.terms.iter().map(|t| t.n * t.rows).sum()
    }
}

fn check_loss(loss: Loss) -> Result<(), Error> {
    match loss {
        Loss::Huber(c) | Loss::Cauchy(c) if !(c > 0.0 && c.is_finite()) => Err(Error::Unsupported(
            format!("a robust loss's scale is positive and finite; got {c}"),
        )),
        _ => Ok(()),
    }
}
