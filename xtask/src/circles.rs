//! The circles of the import graph ([`crate::imports`]), which `cargo xtask tidy`
//! refuses, and the core's top-level modules as layers (`cargo xtask core-graph`).

use std::collections::{BTreeMap, BTreeSet};

use crate::imports::{Graph, Import};

/// The circles of `graph`: groups of two or more files that import each other in a loop,
/// a file and the modules nested in it not counting as a loop. Each is its files and
/// the imports between them.
pub(crate) fn circles(graph: &Graph) -> Vec<Vec<&Import>> {
    let edges: Vec<&Import> = graph
        .imports
        .iter()
        .filter(|i| !graph.related(&i.from, &i.to))
        .collect();
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for edge in &edges {
        next.entry(&edge.from).or_default().push(&edge.to);
        next.entry(&edge.to).or_default();
    }
    strongly_connected(&next)
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|group| {
            edges
                .iter()
                .filter(|e| group.contains(e.from.as_str()) && group.contains(e.to.as_str()))
                .copied()
                .collect()
        })
        .collect()
}

/// The strongly connected components of a graph (Tarjan), each as a set of nodes.
fn strongly_connected<'a>(next: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<BTreeSet<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<&'a str>>,
    }
    fn visit<'a>(node: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(node, i);
        s.low.insert(node, i);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &to in next.get(node).into_iter().flatten() {
            if !s.index.contains_key(to) {
                visit(to, next, s);
                let low = s.low[node].min(s.low[to]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(to) {
                let low = s.low[node].min(s.index[to]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut group = BTreeSet::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                group.insert(top);
                if top == node {
                    break;
                }
            }
            s.out.push(group);
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &node in next.keys() {
        if !state.index.contains_key(node) {
            visit(node, next, &mut state);
        }
    }
    state.out.sort();
    state.out
}

/// The top-level modules of the crate rooted at `src` (`lib` for the root) and the ones
/// each imports, past re-exports: `crate::Error` re-exported by `lib.rs` from `error`
/// is an arrow to `error`. The root's own arrows (its declarations and re-exports, the
/// crate's face) are left out.
pub(crate) fn top_module_graph(graph: &Graph, src: &str) -> BTreeMap<String, BTreeSet<String>> {
    let top = |file: &str| {
        file.strip_prefix(src)
            .filter(|_| graph.module_paths.contains_key(file))
            .and_then(|_| graph.module_paths[file].first().cloned())
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, _) in graph
        .module_paths
        .iter()
        .filter(|(f, _)| f.starts_with(src))
    {
        if let Some(module) = top(file) {
            out.entry(module).or_default();
        }
    }
    for import in &graph.imports {
        let from_root = [format!("{src}lib.rs"), format!("{src}main.rs")].contains(&import.from);
        if let (Some(from), Some(to)) = (top(&import.from), top(&import.defined_in))
            && from != to
            && !from_root
        {
            out.entry(from).or_default().insert(to);
        }
    }
    out
}
