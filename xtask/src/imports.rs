//! Which source file imports which, in every crate of the workspace: the module tree read
//! with `syn` from each crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`), and each
//! path a file writes (`use` trees, qualified paths in code and inside macro calls)
//! resolved to the file that holds the module it reaches. `cargo xtask tidy` finds the
//! circles in this graph ([`crate::circles`]).
//!
//! A path resolves the way the compiler walks it: `crate::`, `super::`, `self::`, a module
//! the current one declares, or a name a `use` of the current module binds; then down the
//! declared modules while the segments name them. The first segment that is no module is
//! an item of the module reached, and that module's file is the import: a name a `mod.rs`
//! or `lib.rs` re-exports imports that file, not the one behind the re-export (the reader
//! of the path sees the re-exporter). Code under `#[cfg(test)]` is left out, and so are
//! comments, doc comments and strings, which `syn` never shows as paths.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use crate::paths::{Collector, is_test_only, item_attrs};

/// One file importing another: the names it takes, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Import {
    pub(crate) from: String,
    pub(crate) to: String,
    /// The file that defines what is taken, past re-exports (`to` when it defines it).
    pub(crate) defined_in: String,
    pub(crate) names: BTreeSet<String>,
}

/// The imports between the files of every crate under `root`, and the files each file
/// declares as modules (directly or deeper): a file and the ones nested in it are one
/// family, whose arrows are the module tree itself rather than a dependency.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    pub(crate) imports: Vec<Import>,
    /// File → the files of the modules nested in it, at any depth.
    pub(crate) descendants: BTreeMap<String, BTreeSet<String>>,
    /// File → its module path in its crate (`lib`/`main` for a root).
    pub(crate) module_paths: BTreeMap<String, Vec<String>>,
    /// Files that could not be read or parsed, with why.
    pub(crate) unreadable: Vec<String>,
}

impl Graph {
    /// Whether `a` and `b` are one family: either declares the other, at any depth.
    pub(crate) fn related(&self, a: &str, b: &str) -> bool {
        let nests = |x: &str, y: &str| self.descendants.get(x).is_some_and(|d| d.contains(y));
        nests(a, b) || nests(b, a)
    }
}

/// The import graph of every crate under `root` (a crate is a directory with a
/// `Cargo.toml` and a `src/`), paths relative to `root`.
pub(crate) fn workspace_graph(root: &Path) -> Graph {
    let mut graph = Graph::default();
    for krate in crate_dirs(root) {
        for crate_root in crate_roots(&krate.join("src")) {
            read_crate(root, &crate_root, &mut graph);
        }
    }
    graph
}

/// Directories holding a `Cargo.toml` and a `src/`, outside `target*` and hidden ones.
fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            out.push(dir.clone());
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && !name.starts_with('.') && !name.starts_with("target") {
                dirs.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// The crate roots in a `src/`: `lib.rs`, `main.rs`, and each binary of `bin/`.
fn crate_roots(src: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(entries) = fs::read_dir(src.join("bin")) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            } else if path.join("main.rs").is_file() {
                out.push(path.join("main.rs"));
            }
        }
    }
    out.sort();
    out
}

/// One module of a crate: where it lives and the names it knows.
#[derive(Debug, Default)]
struct Module {
    /// The file holding it, relative to the workspace root.
    file: String,
    parent: Option<usize>,
    /// Where its `mod name;` files are looked for.
    dir: PathBuf,
    children: BTreeMap<String, usize>,
    /// A name a `use` binds → the path it stands for.
    bindings: BTreeMap<String, Vec<String>>,
    /// The paths its code writes (globs end in `*`).
    paths: Vec<Vec<String>>,
}

/// A crate's modules; index 0 is the root.
#[derive(Debug, Default)]
struct Crate {
    modules: Vec<Module>,
}

/// Reads the crate whose root file is `root_file` and adds its imports to `graph`.
fn read_crate(root: &Path, root_file: &Path, graph: &mut Graph) {
    let mut krate = Crate::default();
    let dir = root_file.parent().unwrap_or(root).to_path_buf();
    let name = root_file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    load_file(root, root_file, None, &name, dir, &mut krate, graph);
    for (id, module) in krate.modules.iter().enumerate() {
        graph
            .module_paths
            .entry(module.file.clone())
            .or_insert_with(|| krate.module_path(id, &name));
        let mut ancestor = module.parent;
        while let Some(a) = ancestor {
            let file = &krate.modules[a].file;
            if *file != module.file {
                graph
                    .descendants
                    .entry(file.clone())
                    .or_default()
                    .insert(module.file.clone());
            }
            ancestor = krate.modules[a].parent;
        }
    }
    let mut imports: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for (id, module) in krate.modules.iter().enumerate() {
        for path in &module.paths {
            let Some((target, name)) = krate.resolve(id, path, 0) else {
                continue;
            };
            let to = &krate.modules[target].file;
            if *to == module.file {
                continue;
            }
            let defined_in = krate.definition(target, name.as_deref(), 0);
            let label = name.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
            imports
                .entry((module.file.clone(), to.clone(), defined_in))
                .or_default()
                .insert(label);
        }
    }
    for ((from, to, defined_in), names) in imports {
        graph.imports.push(Import {
            from,
            to,
            defined_in,
            names,
        });
    }
}

/// Parses `file` as a module under `parent` and walks its items.
fn load_file(
    root: &Path,
    file: &Path,
    parent: Option<usize>,
    name: &str,
    dir: PathBuf,
    krate: &mut Crate,
    graph: &mut Graph,
) {
    let rel = file
        .strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .replace('\\', "/");
    let parsed = fs::read_to_string(file)
        .map_err(|e| e.to_string())
        .and_then(|text| syn::parse_file(&text).map_err(|e| e.to_string()));
    let items = match parsed {
        Ok(parsed) => parsed.items,
        Err(why) => {
            graph.unreadable.push(format!("{rel}: {why}"));
            return;
        }
    };
    let id = krate.add(parent, name, rel, dir);
    walk_items(root, &items, id, krate, graph);
}

/// Records the modules, `use` bindings and paths of `items`, which belong to module `id`.
fn walk_items(root: &Path, items: &[syn::Item], id: usize, krate: &mut Crate, graph: &mut Graph) {
    for item in items {
        match item {
            syn::Item::Mod(m) if !is_test_only(&m.attrs) => {
                let name = m.ident.to_string();
                let dir = krate.modules[id].dir.clone();
                let file = krate.modules[id].file.clone();
                if let Some((_, content)) = &m.content {
                    let child = krate.add(Some(id), &name, file, dir.join(&name));
                    walk_items(root, content, child, krate, graph);
                } else if let Some(path) = child_file(&dir, &name, path_attr(&m.attrs)) {
                    let owns_dir = path.file_name().is_some_and(|f| f == "mod.rs")
                        || path_attr(&m.attrs).is_some();
                    let child_dir = if owns_dir {
                        path.parent().unwrap_or(&dir).to_path_buf()
                    } else {
                        dir.join(&name)
                    };
                    load_file(root, &path, Some(id), &name, child_dir, krate, graph);
                }
            }
            item if !is_test_only(item_attrs(item)) => {
                let mut collector = Collector::default();
                collector.visit_item(item);
                let module = &mut krate.modules[id];
                module.bindings.extend(collector.bindings);
                module.paths.extend(collector.paths);
            }
            _ => {}
        }
    }
}

/// The file of `mod name;` in a module whose files live in `dir`.
fn child_file(dir: &Path, name: &str, path_attr: Option<String>) -> Option<PathBuf> {
    if let Some(path) = path_attr {
        return Some(normalize(&dir.join(path))).filter(|p| p.is_file());
    }
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// `path` with its `..` and `.` components folded away, so that a file reached through a
/// `#[path = "../…"]` has the one name it has everywhere else.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The value of a `#[path = "…"]` attribute.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

impl Crate {
    fn add(&mut self, parent: Option<usize>, name: &str, file: String, dir: PathBuf) -> usize {
        let id = self.modules.len();
        self.modules.push(Module {
            file,
            parent,
            dir,
            ..Module::default()
        });
        if let Some(p) = parent {
            self.modules[p].children.insert(name.to_owned(), id);
        }
        id
    }

    fn module_path(&self, id: usize, root_name: &str) -> Vec<String> {
        let mut path = Vec::new();
        let mut cur = id;
        while let Some(parent) = self.modules[cur].parent {
            let name = self.modules[parent]
                .children
                .iter()
                .find(|(_, c)| **c == cur)
                .map(|(n, _)| n.clone())
                .unwrap_or_default();
            path.push(name);
            cur = parent;
        }
        if path.is_empty() {
            path.push(root_name.to_owned());
        }
        path.reverse();
        path
    }

    /// The module `path` reaches from module `from`, and the item it names there (none
    /// when the path ends at a module or a glob); `None` for another crate's path or a
    /// local name.
    fn resolve(
        &self,
        from: usize,
        path: &[String],
        depth: usize,
    ) -> Option<(usize, Option<String>)> {
        let first = path.first()?;
        let mut cur = from;
        let mut rest = &path[1..];
        match first.as_str() {
            "crate" => cur = 0,
            "self" => {}
            "super" => {
                cur = self.modules[cur].parent?;
                while rest.first().is_some_and(|s| s == "super") {
                    cur = self.modules[cur].parent?;
                    rest = &rest[1..];
                }
            }
            name => {
                if let Some(child) = self.modules[from].children.get(name) {
                    cur = *child;
                } else if let Some(bound) = self.modules[from].bindings.get(name) {
                    if depth > 8 || bound.first() == Some(first) {
                        return None;
                    }
                    let expanded: Vec<String> = bound.iter().chain(rest).cloned().collect();
                    return self.resolve(from, &expanded, depth + 1);
                } else {
                    return None;
                }
            }
        }
        for segment in rest {
            match self.modules[cur].children.get(segment) {
                Some(child) => cur = *child,
                None if segment == "*" => return Some((cur, None)),
                None => return Some((cur, Some(segment.clone()))),
            }
        }
        Some((cur, None))
    }

    /// The file defining `name` of module `module`, following its `use` re-exports.
    fn definition(&self, module: usize, name: Option<&str>, depth: usize) -> String {
        let here = self.modules[module].file.clone();
        let Some(bound) = name.and_then(|n| self.modules[module].bindings.get(n)) else {
            return here;
        };
        match self.resolve(module, bound, depth + 1) {
            Some((target, next)) if depth < 8 && (target, next.as_deref()) != (module, name) => {
                self.definition(target, next.as_deref(), depth + 1)
            }
            _ => here,
        }
    }
}

#[cfg(test)]
mod tests;
