//! What one item of a source file writes, for the import graph ([`crate::imports`]): the
//! names its `use`s bind and the paths its code and macro calls spell, as `syn` parses
//! them (comments, doc comments and strings are never paths). Code compiled only for
//! tests is skipped.

use std::collections::BTreeMap;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Whether the attributes compile the item only for tests (`#[cfg(test)]`,
/// `#[cfg(all(test, …))]`).
pub(crate) fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && match &a.meta {
                syn::Meta::List(list) => {
                    let mut tokens = list.tokens.clone().into_iter();
                    match tokens.next() {
                        Some(TokenTree::Ident(i)) if i == "test" => tokens.next().is_none(),
                        Some(TokenTree::Ident(i)) if i == "all" => {
                            matches!(tokens.next(), Some(TokenTree::Group(g))
                                if g.stream().into_iter().any(|t| matches!(t, TokenTree::Ident(i) if i == "test")))
                        }
                        _ => false,
                    }
                }
                _ => false,
            }
    })
}

pub(crate) fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// What the code of one item writes: the names its `use`s bind, and its paths.
#[derive(Default)]
pub(crate) struct Collector {
    pub(crate) bindings: BTreeMap<String, Vec<String>>,
    pub(crate) paths: Vec<Vec<String>>,
}

impl Collector {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.bind(prefix, &n.ident.to_string(), None),
            syn::UseTree::Rename(r) => {
                self.bind(prefix, &r.ident.to_string(), Some(r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => {
                let mut path = prefix.clone();
                path.push("*".to_owned());
                self.paths.push(path);
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// `use prefix::name [as alias]`: `self` in a group names the prefix itself.
    fn bind(&mut self, prefix: &[String], name: &str, alias: Option<String>) {
        let mut path = prefix.to_vec();
        if name != "self" || prefix.is_empty() {
            path.push(name.to_owned());
        }
        let bound = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
        if bound != "_" {
            self.bindings.insert(bound, path.clone());
        }
        self.paths.push(path);
    }

    /// A path of code: one segment alone (`x`, `self`, `crate` of `pub(crate)`) reaches
    /// no other file, or only as the `use` that bound it, read already.
    fn path_segments(&mut self, segments: Vec<String>) {
        if segments.len() >= 2 {
            self.paths.push(segments);
        }
    }

    /// The paths written inside a macro call (`a::b::c`, not `$crate::…`).
    fn tokens(&mut self, tokens: TokenStream) {
        let mut current: Vec<String> = Vec::new();
        let mut colons = 0;
        let mut after_dollar = false;
        for token in tokens {
            match token {
                TokenTree::Ident(ident) => {
                    if !current.is_empty() && colons != 2 {
                        self.path_segments(std::mem::take(&mut current));
                    }
                    // `$crate::…` names the crate from outside: a path that never resolves.
                    let dollar = if after_dollar { "$" } else { "" };
                    current.push(format!("{dollar}{ident}"));
                    colons = 0;
                    after_dollar = false;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !current.is_empty() => {
                    colons += 1;
                }
                TokenTree::Punct(p) => {
                    self.path_segments(std::mem::take(&mut current));
                    colons = 0;
                    after_dollar = p.as_char() == '$';
                }
                TokenTree::Group(g) => {
                    self.path_segments(std::mem::take(&mut current));
                    colons = 0;
                    after_dollar = false;
                    self.tokens(g.stream());
                }
                TokenTree::Literal(_) => {
                    self.path_segments(std::mem::take(&mut current));
                    colons = 0;
                    after_dollar = false;
                }
            }
        }
        self.path_segments(current);
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.path_segments(path.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }

    // Attributes are not code: `#[doc]`, `#[serde(…)]`, `#[cfg(…)]` name no module.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    // `pub(in crate::a)` says who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}
