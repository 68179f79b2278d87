//! Property: no module of a crate imports another that imports it back (directly or
//! through others), so each can be read and changed knowing only what it depends on.
//!
//! Dependencies are read from the source: `crate::a::b` paths (in `use` lines and code)
//! and `super::x` paths to a sibling. Doc comments are not dependencies: the IR's
//! documentation may point at the passes that read it. A module and its ancestors are not
//! an edge: a child always sees its parent's items.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The module path of each source file of a crate, from its `src` folder.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        entries.sort();
        for path in entries {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(stem.to_string());
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                if !matches!(stem, "mod" | "lib" | "main") {
                    p.push(stem.to_string());
                }
                out.insert(p.join("::"), path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// The identifier path that starts at byte `at` (`a::b::c`), without generics or braces.
fn path_at(text: &str, at: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = &text[at..];
    loop {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        parts.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    parts
}

/// The longest known module that `path` names (a path may go on into an item).
fn module_of(path: &[String], known: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| known.contains_key(m))
}

fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b == a || b.starts_with(&format!("{a}::"))
}

/// Edges `module -> module it names`, between modules neither of which contains the other.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let text: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .flat_map(|l| [l, "\n"])
            .collect();
        let parent: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let parent = &parent[..parent.len().saturating_sub(1)];
        let mut targets = Vec::new();
        for (at, _) in text.match_indices("crate::") {
            targets.push(path_at(&text, at + "crate::".len()));
        }
        for (at, _) in text.match_indices("super::") {
            let mut p = parent.to_vec();
            p.extend(path_at(&text, at + "super::".len()));
            targets.push(p);
        }
        for target in targets {
            if let Some(m) = module_of(&target, &mods)
                && !is_ancestor(&m, module)
                && !is_ancestor(module, &m)
            {
                graph.entry(module.clone()).or_default().insert(m);
            }
        }
    }
    graph
}

/// A cycle through `graph`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["shaders-gen", "runtime", "macros", "."] {
        let src = root.join(krate).join("src");
        let graph = edges(&src);
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{krate}: modules import each other: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph
        .entry("abi".into())
        .or_default()
        .insert("lower".into());
    graph.entry("lower".into()).or_default().insert("ir".into());
    assert_eq!(find_cycle(&graph), None);
    graph.entry("ir".into()).or_default().insert("abi".into());
    assert_eq!(
        find_cycle(&graph),
        Some(vec![
            "abi".into(),
            "lower".into(),
            "ir".into(),
            "abi".into()
        ])
    );
}

#[test]
fn the_checker_reads_the_edges_of_this_repository() {
    // The compiler's stages depend on the IR: if the reader missed these, the property
    // above would hold vacuously.
    let graph = edges(&Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders-gen/src"));
    for (from, to) in [
        ("ad", "ir"),
        ("emit_wgsl::kernel", "abi"),
        ("lower", "signature"),
    ] {
        assert!(
            graph.get(from).is_some_and(|t| t.contains(to)),
            "{from} -> {to} not found in {graph:?}"
        );
    }
}
