//! The module tree of a crate's sources, name resolution through it, and the uses each
//! file makes of the others.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream, Parser};
use syn::{Attribute, Item, ItemUse, Meta, UseTree};

use crate::Reason;
use crate::lex::{instrument, marker_line};

/// The crate root's module id.
const ROOT: usize = 0;

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// An item defined in this file (by index).
    File(usize),
    /// A module of the crate (by id).
    Module(usize),
    /// Something outside the crate (`std`, another crate).
    External,
}

/// One name (or glob) brought in by a `use` declaration.
#[derive(Clone, Debug)]
struct UseLeaf {
    /// The imported path, line markers removed (for `a::{self}` it is `a`).
    path: Vec<String>,
    /// The name it binds (`None` for a glob).
    binding: Option<String>,
    line: usize,
    /// The declaration as shown in messages: `use crate::db::Db`.
    text: String,
}

#[derive(Debug)]
struct Module {
    file: usize,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// Names of the items defined in this module (types, functions, constants, …).
    items: BTreeSet<String>,
    /// Names bound by `extern crate`.
    externs: BTreeSet<String>,
    /// The module-level `use` declarations, outside `#[cfg(test)]`.
    uses: Vec<UseLeaf>,
}

/// A syntax tree node and the tokens it was parsed from (syn only prints nodes back to
/// tokens through `quote`, which this crate does not depend on).
type Parsed<T> = (T, TokenStream);

struct SourceFile {
    /// The path relative to the source folder, with `/` separators.
    rel: String,
    items: Vec<Parsed<Item>>,
    module: usize,
}

/// A crate's module tree, its files parsed.
pub(crate) struct Tree {
    files: Vec<SourceFile>,
    modules: Vec<Module>,
    /// `#[macro_export]` macros (which live at the crate root) and the file defining each.
    exported_macros: BTreeMap<String, usize>,
}

/// What scanning one file's items found.
#[derive(Default)]
struct FileScan {
    /// Identifiers in code, outside `use` declarations and test code.
    mentions: BTreeSet<String>,
    /// Paths in code: the module they appear in, their segments, their line.
    paths: Vec<(usize, Vec<String>, usize)>,
    /// `use` declarations inside functions and blocks, with their module.
    local_uses: Vec<(usize, UseLeaf)>,
}

impl Tree {
    /// Reads the crate whose root is `src/lib.rs` (or `src/main.rs`) and every file its
    /// `mod` declarations reach, test modules left out.
    pub(crate) fn load(src: &Path) -> Result<Tree, String> {
        let mut tree = Tree {
            files: Vec::new(),
            modules: Vec::new(),
            exported_macros: BTreeMap::new(),
        };
        let root = ["lib.rs", "main.rs"]
            .into_iter()
            .find(|name| src.join(name).is_file())
            .ok_or_else(|| format!("{}: no lib.rs or main.rs", src.display()))?;
        tree.load_file(src, &src.join(root), None, src)?;
        Ok(tree)
    }

    /// The files, relative to the source folder, in the order they were found.
    pub(crate) fn file_names(&self) -> Vec<String> {
        self.files.iter().map(|f| f.rel.clone()).collect()
    }

    fn load_file(
        &mut self,
        src: &Path,
        path: &Path,
        parent: Option<usize>,
        child_dir: &Path,
    ) -> Result<usize, String> {
        let rel = path
            .strip_prefix(src)
            .unwrap_or(path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        if let Some(seen) = self.files.iter().find(|f| f.rel == rel) {
            return Err(format!("{rel} is loaded twice (also as a module of {})", {
                let m = &self.modules[seen.module];
                m.parent.map_or("the crate root".to_string(), |p| {
                    self.files[self.modules[p].file].rel.clone()
                })
            }));
        }
        let text = fs::read_to_string(path).map_err(|e| format!("{rel}: {e}"))?;
        // The line markers keep the syntax valid; should some construct defeat them, the
        // file is parsed as written and its lines are reported as unknown.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let items = Parser::parse_str(split::<Item>, &instrument(text))
            .or_else(|_| Parser::parse_str(split::<Item>, text))
            .map_err(|e| format!("{rel}: does not parse: {e}"))?;
        let file = self.files.len();
        let module = self.new_module(file, parent);
        self.files.push(SourceFile {
            rel,
            items: Vec::new(),
            module,
        });
        let base = path.parent().unwrap_or(src).to_path_buf();
        self.collect(src, module, &items, child_dir, &base)?;
        self.files[file].items = items;
        Ok(module)
    }

    fn new_module(&mut self, file: usize, parent: Option<usize>) -> usize {
        self.modules.push(Module {
            file,
            parent,
            children: BTreeMap::new(),
            items: BTreeSet::new(),
            externs: BTreeSet::new(),
            uses: Vec::new(),
        });
        self.modules.len() - 1
    }

    /// Records the items of `module`, loading the files of its `mod` declarations:
    /// `child_dir` is where `mod x;` looks for `x.rs` and `x/mod.rs`, `path_base` what
    /// `#[path = "…"]` is relative to.
    fn collect(
        &mut self,
        src: &Path,
        module: usize,
        items: &[Parsed<Item>],
        child_dir: &Path,
        path_base: &Path,
    ) -> Result<(), String> {
        let file = self.modules[module].file;
        for (item, tokens) in items {
            let name = match item {
                Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let path_attr = path_attribute(&m.attrs);
                    let child = if m.content.is_some() {
                        let content = split_body::<Item>(tokens)
                            .map_err(|e| format!("{}: {e}", self.files[file].rel))?;
                        let child = self.new_module(file, Some(module));
                        let dir = match &path_attr {
                            Some(p) => child_dir.join(p),
                            None => child_dir.join(&name),
                        };
                        self.collect(src, child, &content, &dir, &dir)?;
                        child
                    } else {
                        let (path, dir) = match &path_attr {
                            Some(p) => {
                                let path = path_base.join(p);
                                let dir = path.parent().unwrap_or(src).to_path_buf();
                                (path, dir)
                            }
                            None => {
                                let flat = child_dir.join(format!("{name}.rs"));
                                let nested = child_dir.join(&name).join("mod.rs");
                                let path = if flat.is_file() {
                                    flat
                                } else if nested.is_file() {
                                    nested
                                } else {
                                    return Err(format!(
                                        "{}: `mod {name};` but neither {} nor {} exists",
                                        self.files[file].rel,
                                        relative(src, &flat),
                                        relative(src, &nested),
                                    ));
                                };
                                (path, child_dir.join(&name))
                            }
                        };
                        self.load_file(src, &path, Some(module), &dir)?
                    };
                    self.modules[module].children.insert(name, child);
                    continue;
                }
                Item::Use(u) => {
                    let leaves = use_leaves(u);
                    self.modules[module].uses.extend(leaves);
                    continue;
                }
                Item::ExternCrate(e) => {
                    let name = e.rename.as_ref().map_or(&e.ident, |(_, r)| r);
                    self.modules[module].externs.insert(name.to_string());
                    continue;
                }
                Item::Macro(m) => {
                    if let Some(ident) = &m.ident
                        && m.attrs.iter().any(|a| a.path().is_ident("macro_export"))
                    {
                        self.exported_macros.insert(ident.to_string(), file);
                    }
                    m.ident.as_ref()
                }
                Item::Const(i) => Some(&i.ident),
                Item::Enum(i) => Some(&i.ident),
                Item::Fn(i) => Some(&i.sig.ident),
                Item::Static(i) => Some(&i.ident),
                Item::Struct(i) => Some(&i.ident),
                Item::Trait(i) => Some(&i.ident),
                Item::TraitAlias(i) => Some(&i.ident),
                Item::Type(i) => Some(&i.ident),
                Item::Union(i) => Some(&i.ident),
                _ => None,
            };
            if let Some(name) = name {
                self.modules[module].items.insert(name.to_string());
            }
        }
        Ok(())
    }

    // ----- name resolution -----

    /// Resolves a path as written in module `ctx` (`crate::…`, `self::…`, `super::…`, or
    /// starting with a name in scope there). `None`: it names nothing known.
    fn resolve(
        &self,
        ctx: usize,
        segs: &[String],
        guard: &mut Vec<(usize, String)>,
    ) -> Option<Target> {
        let (first, rest) = segs.split_first()?;
        match first.as_str() {
            "crate" => Some(self.walk(ROOT, rest, guard)),
            "self" => Some(self.walk(ctx, rest, guard)),
            "super" => Some(self.walk(self.modules[ctx].parent?, rest, guard)),
            _ => {
                let target = self.lookup(ctx, first, rest.is_empty(), guard)?;
                Some(self.walk_from(target, rest, guard))
            }
        }
    }

    fn walk_from(
        &self,
        target: Target,
        rest: &[String],
        guard: &mut Vec<(usize, String)>,
    ) -> Target {
        match target {
            Target::Module(m) => self.walk(m, rest, guard),
            other => other,
        }
    }

    /// Follows `rest` down from module `m`. A name that is not found is taken to be an
    /// item of `m` that the parser cannot see (made by a macro).
    fn walk(&self, m: usize, rest: &[String], guard: &mut Vec<(usize, String)>) -> Target {
        let Some((name, more)) = rest.split_first() else {
            return Target::Module(m);
        };
        match name.as_str() {
            "self" => return self.walk(m, more, guard),
            "super" => {
                return match self.modules[m].parent {
                    Some(p) => self.walk(p, more, guard),
                    None => Target::Module(m),
                };
            }
            _ => {}
        }
        match self.lookup(m, name, more.is_empty(), guard) {
            Some(target) => self.walk_from(target, more, guard),
            None => Target::File(self.modules[m].file),
        }
    }

    /// What `name` means in module `m`: a child module, an item defined there, or what a
    /// `use` there (of any visibility, globs last) makes of it. `last`: nothing follows
    /// the name in the path (so an item wins over a module of the same name).
    fn lookup(
        &self,
        m: usize,
        name: &str,
        last: bool,
        guard: &mut Vec<(usize, String)>,
    ) -> Option<Target> {
        let module = &self.modules[m];
        if let Some(&child) = module.children.get(name)
            && (!last || !module.items.contains(name))
        {
            return Some(Target::Module(child));
        }
        if module.items.contains(name) {
            return Some(Target::File(module.file));
        }
        if m == ROOT
            && let Some(&file) = self.exported_macros.get(name)
        {
            return Some(Target::File(file));
        }
        if module.externs.contains(name) {
            return Some(Target::External);
        }
        let key = (m, name.to_string());
        if guard.contains(&key) {
            return None;
        }
        guard.push(key);
        let found = self.lookup_uses(m, name, last, guard);
        guard.pop();
        found
    }

    fn lookup_uses(
        &self,
        m: usize,
        name: &str,
        last: bool,
        guard: &mut Vec<(usize, String)>,
    ) -> Option<Target> {
        let mut external = None;
        // The same name can be imported twice in different namespaces (a derive macro and
        // a trait): the crate's own wins.
        for leaf in &self.modules[m].uses {
            if leaf.binding.as_deref() == Some(name) {
                match self.resolve(m, &leaf.path, guard) {
                    Some(Target::External) => external = Some(Target::External),
                    Some(target) => return Some(target),
                    None => {}
                }
            }
        }
        for leaf in &self.modules[m].uses {
            if leaf.binding.is_none()
                && let Some(Target::Module(g)) = self.resolve(m, &leaf.path, guard)
            {
                match self.lookup(g, name, last, guard) {
                    Some(Target::External) => external = Some(Target::External),
                    Some(target) => return Some(target),
                    None => {}
                }
            }
        }
        external
    }

    fn file_of(&self, target: Target) -> Option<usize> {
        match target {
            Target::File(f) => Some(f),
            Target::Module(m) => Some(self.modules[m].file),
            Target::External => None,
        }
    }

    // ----- the uses of one file -----

    /// Every use file `f` makes of another file (by index), with the responsible line.
    pub(crate) fn uses_of(&self, f: usize) -> Vec<(usize, Reason)> {
        let mut scan = FileScan::default();
        let source = &self.files[f];
        self.scan_items(source.module, &source.items, &mut scan);
        let mut out = Vec::new();
        let mut push = |target: Option<usize>, line: usize, text: String| {
            if let Some(to) = target
                && to != f
            {
                out.push((to, Reason { line, text }));
            }
        };

        // Modules named by function-local `use`s, for `alias::Item` paths.
        let mut local_aliases = HashMap::new();
        for (ctx, leaf) in &scan.local_uses {
            if let (Some(name), Some(Target::Module(m))) = (
                &leaf.binding,
                self.resolve(*ctx, &leaf.path, &mut Vec::new()),
            ) {
                local_aliases.insert(name.clone(), m);
            }
        }

        // Paths in code. A relative path counts when its first segment is a module.
        let mut resolved_further = HashSet::new();
        for (ctx, segs, line) in &scan.paths {
            let first = segs[0].as_str();
            let target = if matches!(first, "crate" | "self" | "super") {
                self.resolve(*ctx, segs, &mut Vec::new())
            } else {
                let module = match self.lookup(*ctx, first, false, &mut Vec::new()) {
                    Some(Target::Module(m)) => Some(m),
                    _ => local_aliases.get(first).copied(),
                };
                module.map(|m| {
                    resolved_further.insert(first.to_string());
                    self.walk(m, &segs[1..], &mut Vec::new())
                })
            };
            push(target.and_then(|t| self.file_of(t)), *line, segs.join("::"));
        }

        // `use` declarations: the module-level ones of every (non-test) module of the
        // file, then those inside functions.
        let module_uses = self
            .modules
            .iter()
            .enumerate()
            .filter(|(_, module)| module.file == f)
            .flat_map(|(m, module)| module.uses.iter().map(move |leaf| (m, leaf)));
        let local_uses = scan.local_uses.iter().map(|(m, leaf)| (*m, leaf));
        for (ctx, leaf) in module_uses.chain(local_uses) {
            match &leaf.binding {
                Some(name) => match self.resolve(ctx, &leaf.path, &mut Vec::new()) {
                    Some(Target::File(to)) => push(Some(to), leaf.line, leaf.text.clone()),
                    Some(Target::Module(m)) if !resolved_further.contains(name) => {
                        push(Some(self.modules[m].file), leaf.line, leaf.text.clone());
                    }
                    _ => {}
                },
                None => match self.resolve(ctx, &leaf.path, &mut Vec::new()) {
                    Some(Target::Module(g)) => {
                        // What the file mentions that the glob brings in.
                        let module = &self.modules[ctx];
                        let mut any = false;
                        for name in &scan.mentions {
                            let shadowed = module.items.contains(name)
                                || module.children.contains_key(name)
                                || module.uses.iter().any(|u| u.binding.as_ref() == Some(name));
                            if shadowed {
                                continue;
                            }
                            if let Some(target) = self.lookup(g, name, true, &mut Vec::new())
                                && target != Target::External
                            {
                                any = true;
                                push(
                                    self.file_of(target),
                                    leaf.line,
                                    format!("{} ({name})", leaf.text),
                                );
                            }
                        }
                        if !any {
                            push(Some(self.modules[g].file), leaf.line, leaf.text.clone());
                        }
                    }
                    Some(Target::File(to)) => push(Some(to), leaf.line, leaf.text.clone()),
                    _ => {}
                },
            }
        }
        out
    }

    fn scan_items(&self, ctx: usize, items: &[Parsed<Item>], scan: &mut FileScan) {
        for (item, tokens) in items {
            match item {
                Item::Use(_) => {}
                Item::Mod(m) => {
                    if m.content.is_some()
                        && let Some(&child) = self.modules[ctx].children.get(&m.ident.to_string())
                        && let Ok(content) = split_body::<Item>(tokens)
                    {
                        self.scan_items(child, &content, scan);
                    }
                }
                _ => scan_tokens(ctx, tokens.clone(), scan),
            }
        }
    }
}

/// Parses a sequence of `T` (after inner attributes), keeping each one's tokens.
fn split<T: Parse>(input: ParseStream<'_>) -> syn::Result<Vec<Parsed<T>>> {
    input.call(Attribute::parse_inner)?;
    let mut out = Vec::new();
    while !input.is_empty() {
        let mut cursor = input.cursor();
        let node: T = input.parse()?;
        let end = input.cursor();
        let mut tokens = TokenStream::new();
        while cursor < end {
            let Some((token, next)) = cursor.token_tree() else {
                break;
            };
            tokens.extend([token]);
            cursor = next;
        }
        out.push((node, tokens));
    }
    Ok(out)
}

/// The contents of the braces that end an item (`mod m { … }`, `impl … { … }`).
fn split_body<T: Parse>(tokens: &TokenStream) -> syn::Result<Vec<Parsed<T>>> {
    match tokens.clone().into_iter().last() {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
            split::<T>.parse2(g.stream())
        }
        _ => Ok(Vec::new()),
    }
}

fn relative(src: &Path, path: &Path) -> String {
    path.strip_prefix(src).unwrap_or(path).display().to_string()
}

/// Records the identifiers and the paths of `tokens` (recursing into groups), and the
/// `use` declarations among them.
fn scan_tokens(ctx: usize, tokens: TokenStream, scan: &mut FileScan) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let punct =
        |i: usize, c: char| matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c);
    let ident = |i: usize| match tokens.get(i) {
        Some(TokenTree::Ident(id)) => Some(id.to_string()),
        _ => None,
    };
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => {
                scan_tokens(ctx, g.stream(), scan);
                i += 1;
            }
            TokenTree::Ident(id) => {
                let name = id.to_string();
                if name == "use"
                    && let Some(end) = (i..tokens.len()).find(|&j| punct(j, ';'))
                {
                    let decl: TokenStream = tokens[i..=end].iter().cloned().collect();
                    if let Ok(decl) = syn::parse2::<ItemUse>(decl) {
                        scan.local_uses
                            .extend(use_leaves(&decl).into_iter().map(|leaf| (ctx, leaf)));
                        i = end + 1;
                        continue;
                    }
                }
                if marker_line(&name).is_some() {
                    i += 1;
                    continue;
                }
                let path_start = punct(i + 1, ':')
                    && punct(i + 2, ':')
                    && !(i >= 1 && (punct(i - 1, '$') || punct(i - 1, '.')))
                    && !(i >= 2 && punct(i - 1, ':') && punct(i - 2, ':'));
                if !path_start {
                    scan.mentions.insert(name);
                    i += 1;
                    continue;
                }
                let mut segs = vec![name];
                let mut line = 0;
                let mut j = i + 1;
                while punct(j, ':') && punct(j + 1, ':') {
                    let Some(next) = ident(j + 2) else { break };
                    match marker_line(&next) {
                        Some(l) => line = l,
                        None => segs.push(next),
                    }
                    j += 3;
                }
                scan.mentions.extend(segs.iter().cloned());
                scan.paths.push((ctx, segs, line));
                i = j;
            }
            _ => i += 1,
        }
    }
}

/// The names and globs a `use` declaration brings in.
fn use_leaves(decl: &ItemUse) -> Vec<UseLeaf> {
    let mut out = Vec::new();
    if decl.leading_colon.is_none() {
        flatten(&decl.tree, &mut Vec::new(), 0, &mut out);
    }
    out
}

fn flatten(tree: &UseTree, prefix: &mut Vec<String>, line: usize, out: &mut Vec<UseLeaf>) {
    let text = |path: &[String], tail: &str| {
        let mut text = format!("use {}", path.join("::"));
        text.push_str(tail);
        text
    };
    match tree {
        UseTree::Path(p) => {
            let name = p.ident.to_string();
            match marker_line(&name) {
                Some(l) => flatten(&p.tree, prefix, l, out),
                None => {
                    prefix.push(name);
                    flatten(&p.tree, prefix, line, out);
                    prefix.pop();
                }
            }
        }
        UseTree::Name(n) => {
            let name = n.ident.to_string();
            let (path, binding) = if name == "self" {
                (prefix.clone(), prefix.last().cloned())
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                (path, Some(name))
            };
            if let Some(binding) = binding {
                out.push(UseLeaf {
                    text: text(&path, ""),
                    path,
                    binding: Some(binding),
                    line,
                });
            }
        }
        UseTree::Rename(r) => {
            let name = r.ident.to_string();
            let mut path = prefix.clone();
            if name != "self" {
                path.push(name);
            }
            let rename = r.rename.to_string();
            out.push(UseLeaf {
                text: text(&path, &format!(" as {rename}")),
                path,
                binding: Some(rename),
                line,
            });
        }
        UseTree::Glob(_) => out.push(UseLeaf {
            text: text(prefix, "::*"),
            path: prefix.clone(),
            binding: None,
            line,
        }),
        UseTree::Group(g) => {
            for tree in &g.items {
                flatten(tree, prefix, line, out);
            }
        }
    }
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attrs: &[Attribute]) -> Option<PathBuf> {
    attrs.iter().find_map(|attr| {
        let Meta::NameValue(nv) = &attr.meta else {
            return None;
        };
        if !nv.path.is_ident("path") {
            return None;
        }
        match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(PathBuf::from(s.value())),
            _ => None,
        }
    })
}
