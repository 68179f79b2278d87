//! Shared gradients that are outer products, summed over the workgroup in tiles.
//!
//! A dense layer's weight gradient is, for each element, an outer product: word `(i, j)`
//! of `d/d w` is `d_s[i] * h[j]`, and a bias word is `d_s[i]` alone (a product with one).
//! Staged word by word (see `streams`), every product costs a store into workgroup memory
//! and a share of a tree sum with three barriers every 8 words. Summed as an outer product,
//! each element stages its `m + n` factors once, and the workgroup computes
//! `sum over e of D[e]^T H[e]` the way a matrix product is computed: thread `t` keeps the
//! sums of an `ra x rb` tile of words in registers across all its elements, reading
//! `ra + rb` staged factors per element for `ra * rb` products. The factors are staged a
//! chunk of the workgroup's elements at a time (as many as fit `reduce_stage`), two
//! barriers a chunk; after the last element each tile's sums go to the words' owners
//! (`owned_sums`). The order of every sum is fixed: the same bits on every run.
//!
//! [`find_blocks`] finds the outer products among the words a kernel would stage: it pairs
//! each word with its two factors, groups factors that multiply the same set of partners,
//! and keeps the largest complete blocks whose words lie at `w0 + i * si + j * sj` (and the
//! bias column, if any, at `wb + i * sb`).

use super::body::Ctx;
use crate::abi;
use crate::ir::{Function, Op, ValueId};
use crate::names::{Taken, fresh};
use crate::ops::Func;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;

/// Bytes of workgroup memory `reduce_stage` takes in a kernel that sums outer products:
/// the factors of a chunk of elements. 16 KiB is every WebGPU device's minimum.
pub(super) const OUTER_STAGE_BYTES: u32 = 16384;

/// Fewest words of a block worth summing as an outer product.
const MIN_BLOCK_WORDS: usize = 16;

/// Most accumulators one block's tile keeps per thread, and all blocks' together: each is a
/// register live across the whole element loop.
const MAX_TILE_SUMS: u32 = 16;
const MAX_KERNEL_TILE_SUMS: u32 = 48;

/// Fewest elements of a chunk: below it the barriers cost more than the tiles save.
const MIN_CHUNK: u32 = 8;

/// One factor of a product: a value of the function, or one (a bias word is a product of
/// its value with one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Factor {
    Value(u32),
    One,
}

/// A shared gradient word the kernel would stage: its index among the shared words, and
/// the node that computes it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Candidate {
    pub word: u32,
    pub out: ValueId,
}

/// Where a block's words are: `w0 + i * si + j * sj` for `j < n_main`; the bias column
/// `j = n_main`, if any, at `wb + i * sb`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WordMap {
    w0: u32,
    si: u32,
    sj: u32,
    n_main: u32,
    bias: Option<(u32, u32)>,
}

/// How a block's words are split among the threads.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tile {
    /// Words per tile along `a` and `b`.
    ra: u32,
    rb: u32,
    /// Tiles along `b`, and in all.
    across: u32,
    tiles: u32,
    /// Element groups: threads `t + k * tiles` share tile `t`, each summing every
    /// `groups`-th element of a chunk.
    groups: u32,
}

/// One outer product summed in tiles.
#[derive(Debug)]
pub(super) struct OuterBlock {
    /// The shared array's name, for comments.
    label: String,
    /// Factors along `a` (rows of words) and `b` (columns; one, if there, last).
    a: Vec<Factor>,
    b: Vec<Factor>,
    map: WordMap,
    tile: Tile,
    /// Elements staged at once, and the stage's words per element.
    chunk: u32,
    stride: u32,
    /// The tile's sums, `ra * rb` registers, row by row.
    sums: Vec<String>,
    /// The node after which every factor is computed: the block is summed there.
    pub point: usize,
    /// The block's words (shared word indices), claimed from the staged ones.
    pub words: Vec<u32>,
}

/// The words of `candidates` that form outer products of at least [`MIN_BLOCK_WORDS`]
/// words, as blocks to sum in tiles (each word in at most one). `usable(v)` says whether a
/// value has a name in the kernel's body (it is written, not skipped); `pass` is the
/// workgroup's elements per pass of its loop, `scalar_bytes` the float's size.
pub(super) fn find_blocks(
    f: &Function,
    candidates: &[Candidate],
    usable: impl Fn(ValueId) -> bool,
    pass: u32,
    scalar_bytes: u32,
    label_of: impl Fn(u32) -> String,
    taken: &mut Taken,
) -> Vec<OuterBlock> {
    let pairs = factor_pairs(f, candidates, &usable);
    let mut partners: BTreeMap<Factor, BTreeSet<Factor>> = BTreeMap::new();
    for &(a, b) in pairs.keys() {
        partners.entry(a).or_default().insert(b);
        partners.entry(b).or_default().insert(a);
    }
    // Factors with the same partners are the rows of one complete block.
    let mut groups: BTreeMap<&BTreeSet<Factor>, Vec<Factor>> = BTreeMap::new();
    for (factor, with) in &partners {
        groups.entry(with).or_default().push(*factor);
    }
    let word = |a: Factor, b: Factor| pairs.get(&(a.min(b), a.max(b))).copied();
    let mut shapes: Vec<(Vec<Factor>, Vec<Factor>)> = groups
        .into_iter()
        .map(|(with, rows)| (rows, with.iter().copied().collect::<Vec<_>>()))
        .filter(|(a, b)| a.len() * b.len() >= MIN_BLOCK_WORDS)
        .collect();
    // Largest first; among equals, the one with the lowest word (a fixed order).
    let first_word = |(a, b): &(Vec<Factor>, Vec<Factor>)| word(a[0], b[0]).unwrap_or(u32::MAX);
    shapes.sort_by_key(|s| (std::cmp::Reverse(s.0.len() * s.1.len()), first_word(s)));
    let mut claimed: BTreeSet<u32> = BTreeSet::new();
    let mut blocks = Vec::new();
    let mut budget = MAX_KERNEL_TILE_SUMS;
    for (a, b) in shapes {
        let Some(words) = a
            .iter()
            .flat_map(|&x| b.iter().map(move |&y| word(x, y)))
            .collect::<Option<Vec<u32>>>()
        else {
            continue;
        };
        if words.iter().any(|w| claimed.contains(w)) {
            continue;
        }
        let Some(block) = OuterBlock::new(f, a, b, &word, pass, scalar_bytes, budget) else {
            continue;
        };
        budget -= block.tile.ra * block.tile.rb;
        claimed.extend(&words);
        let label = label_of(block.map.w0);
        blocks.push(OuterBlock {
            sums: (0..block.tile.ra * block.tile.rb)
                .map(|k| {
                    let (i, j) = (k / block.tile.rb, k % block.tile.rb);
                    fresh(taken, &format!("tile_{label}_{i}_{j}"))
                })
                .collect(),
            label,
            words,
            ..block
        });
    }
    blocks
}

/// Each candidate word's two factors (a product's operands; a value not a product, or one
/// that is itself a factor of another word, times one), keyed in order; words whose pair
/// is another word's too are left out (a block sums each pair into one word).
fn factor_pairs(
    f: &Function,
    candidates: &[Candidate],
    usable: &impl Fn(ValueId) -> bool,
) -> BTreeMap<(Factor, Factor), u32> {
    let product = |v: ValueId| match &f.node(v).op {
        Op::Call(Func::Mul, x) if x[0] != x[1] && usable(x[0]) && usable(x[1]) => {
            Some((x[0], x[1]))
        }
        _ => None,
    };
    let factors: BTreeSet<ValueId> = candidates
        .iter()
        .filter_map(|c| product(c.out))
        .flat_map(|(a, b)| [a, b])
        .collect();
    let mut pairs: BTreeMap<(Factor, Factor), u32> = BTreeMap::new();
    let mut repeated = BTreeSet::new();
    for c in candidates {
        let (a, b) = match product(c.out) {
            Some((a, b)) if !factors.contains(&c.out) => (Factor::Value(a.0), Factor::Value(b.0)),
            _ if usable(c.out) && !matches!(f.node(c.out).op, Op::Const(_)) => {
                (Factor::Value(c.out.0), Factor::One)
            }
            _ => continue,
        };
        let key = (a.min(b), a.max(b));
        if pairs.insert(key, c.word).is_some() {
            repeated.insert(key);
        }
    }
    pairs.retain(|k, _| !repeated.contains(k));
    pairs
}

impl OuterBlock {
    /// The block of rows `a` and columns `b` (`word(x, y)` is the word of a pair), its
    /// factors ordered so that its words are affine in `(i, j)`, with a tile of at most
    /// `budget` sums; `None` where the words are not affine or no tile fits.
    fn new(
        f: &Function,
        mut a: Vec<Factor>,
        mut b: Vec<Factor>,
        word: &impl Fn(Factor, Factor) -> Option<u32>,
        pass: u32,
        scalar_bytes: u32,
        budget: u32,
    ) -> Option<OuterBlock> {
        if a.contains(&Factor::One) {
            std::mem::swap(&mut a, &mut b);
        }
        if a.contains(&Factor::One) {
            return None;
        }
        // One, if a column, goes last.
        b.sort_by_key(|y| *y == Factor::One);
        let n_main = b.iter().filter(|y| **y != Factor::One).count();
        let b0 = b[0];
        a.sort_by_key(|&x| word(x, b0));
        let a0 = a[0];
        b[..n_main].sort_by_key(|&y| word(a0, y));
        let map = word_map(&a, &b, n_main, word)?;
        let (m, n) = (a.len() as u32, b.len() as u32);
        let capacity = OUTER_STAGE_BYTES / scalar_bytes;
        let tile = choose_tile(m, n, pass.min(capacity / (m + n + 1)), budget)?;
        let rows = tile.ra * m.div_ceil(tile.ra) + tile.rb * n.div_ceil(tile.rb);
        // An odd stride: consecutive elements' rows fall in different banks.
        let stride = rows | 1;
        let chunk = (capacity / stride).min(pass);
        if chunk < MIN_CHUNK {
            return None;
        }
        let point = a
            .iter()
            .chain(&b)
            .filter_map(|x| match x {
                Factor::Value(v) => Some(*v as usize),
                Factor::One => None,
            })
            .max()?;
        debug_assert!(point < f.nodes.len());
        Some(OuterBlock {
            label: String::new(),
            a,
            b,
            map,
            tile,
            chunk,
            stride,
            sums: Vec::new(),
            point,
            words: Vec::new(),
        })
    }

    /// The sums' declarations, before the element loop.
    pub(super) fn declarations(&self, zero: &str) -> String {
        let mut s = format!(
            "    // Tile sums of d/d {}: {} x {} words summed as an outer product.\n",
            self.label,
            self.a.len(),
            self.b.len()
        );
        for sum in &self.sums {
            let _ = writeln!(s, "    var {sum} = {zero};");
        }
        s
    }
}

/// The affine map of a block's words (factors already in order), if they have one.
fn word_map(
    a: &[Factor],
    b: &[Factor],
    n_main: usize,
    word: &impl Fn(Factor, Factor) -> Option<u32>,
) -> Option<WordMap> {
    let at = |i: usize, j: usize| word(a[i], b[j]);
    let step = |from: u32, to: Option<u32>| to.and_then(|t| t.checked_sub(from)).filter(|s| *s > 0);
    let (w0, si, sj) = if n_main > 0 {
        let w0 = at(0, 0)?;
        let si = if a.len() > 1 { step(w0, at(1, 0))? } else { 0 };
        let sj = if n_main > 1 { step(w0, at(0, 1))? } else { 0 };
        (w0, si, sj)
    } else {
        (0, 0, 0)
    };
    let bias = if n_main < b.len() {
        let wb = at(0, n_main)?;
        let sb = if a.len() > 1 {
            step(wb, at(1, n_main))?
        } else {
            0
        };
        Some((wb, sb))
    } else {
        None
    };
    let map = WordMap {
        w0,
        si,
        sj,
        n_main: n_main as u32,
        bias,
    };
    let affine =
        (0..a.len()).all(|i| (0..b.len()).all(|j| at(i, j) == Some(map.word(i as u32, j as u32))));
    affine.then_some(map)
}

impl WordMap {
    fn word(&self, i: u32, j: u32) -> u32 {
        match self.bias {
            Some((wb, sb)) if j == self.n_main => wb + i * sb,
            _ => self.w0 + i * self.si + j * self.sj,
        }
    }

    /// The word of tile row `gi`, column `gj` (WGSL `u32` expressions).
    fn wgsl(&self, gi: &str, gj: &str) -> String {
        let main = format!("{}u + {gi} * {}u + {gj} * {}u", self.w0, self.si, self.sj);
        match self.bias {
            Some((wb, sb)) => format!(
                "select({main}, {wb}u + {gi} * {sb}u, {gj} == {}u)",
                self.n_main
            ),
            None => main,
        }
    }
}

/// The tile of an `m x n` block whose chunks hold `chunk` elements: the one whose slowest
/// thread does the least work per chunk (products and loads), with at most `budget` sums;
/// `None` if no tile of at most [`MAX_TILE_SUMS`] sums gives each thread one.
fn choose_tile(m: u32, n: u32, chunk: u32, budget: u32) -> Option<Tile> {
    let wg = abi::WORKGROUP_SIZE;
    let mut best: Option<(u32, Tile)> = None;
    for ra in [1, 2, 4, 8] {
        for rb in [1, 2, 4, 8] {
            let (down, across) = (m.div_ceil(ra), n.div_ceil(rb));
            let tiles = down * across;
            if ra * rb > MAX_TILE_SUMS.min(budget) || tiles > wg || chunk == 0 {
                continue;
            }
            let groups = (wg / tiles).min(chunk);
            let cost = chunk.div_ceil(groups) * (ra * rb + ra + rb);
            let tile = Tile {
                ra,
                rb,
                across,
                tiles,
                groups,
            };
            if best.is_none_or(|(c, t)| (cost, ra * rb) < (c, t.ra * t.rb)) {
                best = Some((cost, tile));
            }
        }
    }
    best.map(|(_, t)| t)
}

/// What a kernel needs to sum its blocks: where the stage is, how many elements a thread
/// computes, and the names its statements read.
pub(super) struct OuterKernel {
    /// Elements each thread computes side by side.
    pub elements: u32,
    /// Whether words are staged too (the stage may hold slots to sum first).
    pub streams: bool,
    /// The statement that sums the staged slots.
    pub sum_stage: String,
}

impl OuterBlock {
    /// The statements, written after node [`OuterBlock::point`], that stage the block's
    /// factors chunk by chunk and add the tile's products into its sums.
    pub(super) fn phase(&self, kernel: &OuterKernel, ctx: &mut Ctx, taken: &mut Taken) -> String {
        let wg = abi::WORKGROUP_SIZE;
        let Tile {
            ra,
            rb,
            across,
            tiles,
            groups,
        } = self.tile;
        let (chunk, stride) = (self.chunk, self.stride);
        let pass = wg * kernel.elements;
        let b_rows = ra * (self.a.len() as u32).div_ceil(ra);
        let one = super::float_literal(1.0, ctx.precision);
        let names: Vec<String> = ["c", "first", "at", "tile", "row_a", "row_b", "e", "len"]
            .iter()
            .map(|n| fresh(taken, &format!("outer_{n}")))
            .collect();
        let [c, first, at, tile, row_a, row_b, e, len] = names.as_slice() else {
            unreachable!("eight names")
        };
        let mut s = format!(
            "    // d/d {label}: {m} x {n} words, an outer product summed over the \
             workgroup's elements\n    // {chunk} at a time, in tiles of {ra} x {rb} \
             words ({tiles} tiles, {groups} element groups).\n",
            label = self.label,
            m = self.a.len(),
            n = self.b.len(),
        );
        if kernel.streams {
            let _ = writeln!(
                s,
                "    if (stage_count > 0u) {{ {}; stage_count = 0u; }}",
                kernel.sum_stage
            );
        }
        let _ = writeln!(
            s,
            "    for (var {c} = 0u; {c} < {}u; {c}++) {{\n        let {first} = {c} * {chunk}u;",
            pass.div_ceil(chunk)
        );
        for el in 0..kernel.elements as usize {
            ctx.element = el;
            let offset = match el {
                0 => String::new(),
                el => format!(" + {}u", el as u32 * wg),
            };
            let _ = writeln!(
                s,
                "        if (lid{offset} - {first} < {chunk}u) {{\n            \
                 let {at} = (lid{offset} - {first}) * {stride}u;"
            );
            let rows = self.a.iter().enumerate().map(|(r, x)| (r as u32, x));
            let rows = rows.chain(
                self.b
                    .iter()
                    .enumerate()
                    .map(|(r, y)| (b_rows + r as u32, y)),
            );
            for (r, factor) in rows {
                let v = match factor {
                    Factor::Value(v) => ctx.operand(ValueId(*v)),
                    Factor::One => one.clone(),
                };
                let _ = writeln!(s, "            reduce_stage[{at} + {r}u] = {v};");
            }
            s.push_str("        }\n");
        }
        ctx.element = 0;
        let _ = writeln!(
            s,
            "        workgroupBarrier();\n        if (lid < {}u) {{\n            \
             let {tile} = lid % {tiles}u;\n            \
             let {row_a} = {tile} / {across}u * {ra}u;\n            \
             let {row_b} = {b_rows}u + {tile} % {across}u * {rb}u;\n            \
             let {len} = min({chunk}u, {pass}u - {first});\n            \
             for (var {e} = lid / {tiles}u; {e} < {len}; {e} += {groups}u) {{\n                \
             let {at} = {e} * {stride}u;",
            tiles * groups
        );
        let fa: Vec<String> = (0..ra)
            .map(|i| fresh(taken, &format!("outer_a{i}")))
            .collect();
        let fb: Vec<String> = (0..rb)
            .map(|j| fresh(taken, &format!("outer_b{j}")))
            .collect();
        for (i, name) in fa.iter().enumerate() {
            let _ = writeln!(
                s,
                "                let {name} = reduce_stage[{at} + {row_a} + {i}u];"
            );
        }
        for (j, name) in fb.iter().enumerate() {
            let _ = writeln!(
                s,
                "                let {name} = reduce_stage[{at} + {row_b} + {j}u];"
            );
        }
        for (k, sum) in self.sums.iter().enumerate() {
            let (i, j) = (k / rb as usize, k % rb as usize);
            let _ = writeln!(s, "                {sum} += {} * {};", fa[i], fb[j]);
        }
        s.push_str("            }\n        }\n        workgroupBarrier();\n    }\n");
        s
    }

    /// The statements after the element loop that add the tiles' sums into the owners'
    /// `owned_sums` (`owned` per thread), each word's element groups in order; `zero` is
    /// the float zero.
    pub(super) fn combine(&self, owned: u32, zero: &str, taken: &mut Taken) -> String {
        let wg = abi::WORKGROUP_SIZE;
        let Tile {
            ra,
            rb,
            across,
            tiles,
            groups,
        } = self.tile;
        let (lo_word, hi_word) = (
            *self.words.iter().min().unwrap_or(&0),
            *self.words.iter().max().unwrap_or(&0) + 1,
        );
        // Each part spans as many words as the stage holds sums of all element groups.
        let capacity = self.chunk * self.stride;
        let span = (capacity / groups).min(hi_word - lo_word);
        let parts = (hi_word - lo_word).div_ceil(span);
        let names: Vec<String> = ["part", "lo", "q", "tile", "gi", "gj", "word", "k", "sum"]
            .iter()
            .map(|n| fresh(taken, &format!("outer_{n}")))
            .collect();
        let [part, lo, q, tile, gi, gj, word, k, sum] = names.as_slice() else {
            unreachable!("nine names")
        };
        let (m, n) = (self.a.len(), self.b.len());
        let mut s = format!(
            "    // d/d {}: each word's sums of {groups} element groups, in order, added by its owner.\n",
            self.label
        );
        let _ = writeln!(
            s,
            "    for (var {part} = 0u; {part} < {parts}u; {part}++) {{\n        \
             let {lo} = {lo_word}u + {part} * {span}u;\n        \
             workgroupBarrier();\n        \
             for (var {q} = lid; {q} < {}u; {q} += {wg}u) {{ reduce_stage[{q}] = {zero}; }}\n        \
             workgroupBarrier();\n        \
             if (lid < {}u) {{\n            \
             let {tile} = lid % {tiles}u;",
            span * groups,
            tiles * groups,
        );
        for (idx, acc) in self.sums.iter().enumerate() {
            let (i, j) = (idx as u32 / rb, idx as u32 % rb);
            let _ = writeln!(
                s,
                "            {{\n                \
                 let {gi} = {tile} / {across}u * {ra}u + {i}u;\n                \
                 let {gj} = {tile} % {across}u * {rb}u + {j}u;\n                \
                 let {word} = {};\n                \
                 if ({gi} < {m}u && {gj} < {n}u && {word} - {lo} < {span}u) {{\n                    \
                 reduce_stage[({word} - {lo}) * {groups}u + lid / {tiles}u] = {acc};\n                \
                 }}\n            }}",
                self.map.wgsl(gi, gj)
            );
        }
        let _ = writeln!(
            s,
            "        }}\n        workgroupBarrier();\n        \
             for (var {k} = 0u; {k} < {owned}u; {k}++) {{\n            \
             let {word} = lid + {k} * {wg}u;\n            \
             if ({word} - {lo} < {span}u) {{\n                \
             var {sum} = {zero};"
        );
        for g in 0..groups {
            let _ = writeln!(
                s,
                "                {sum} += reduce_stage[({word} - {lo}) * {groups}u + {g}u];"
            );
        }
        let _ = writeln!(
            s,
            "                owned_sums[{k}] += {sum};\n            }}\n        }}\n    }}"
        );
        s
    }
}

/// Node indices of `f` that are products of a block (read by nothing but the kernel's
/// outputs): once their words are summed as outer products they need not be written.
pub(super) fn unread_products(
    f: &Function,
    blocks: &[OuterBlock],
    outs: &HashMap<u32, ValueId>,
) -> Vec<usize> {
    let read = f.read_by_node();
    let mut unread = Vec::new();
    for block in blocks {
        for w in &block.words {
            if let Some(out) = outs.get(w)
                && !read[out.index()]
                && matches!(f.node(*out).op, Op::Call(Func::Mul, _))
            {
                unread.push(out.index());
            }
        }
    }
    unread
}
