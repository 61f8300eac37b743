//! Line numbers without span locations.
//!
//! `proc-macro2` outside a procedural macro only knows where a token came from with its
//! `span-locations` feature, which the workspace does not enable (turning it on here would
//! change how the derive's dependencies are built). So before parsing, every path that
//! starts a chain (`crate::`, `self::`, `super::`, `name::`) gets one extra segment naming
//! its line: `crate::db::Db` on line 12 becomes `crate::__layers_line_12::db::Db`. Syn parses
//! that as an ordinary path; the resolver drops the segment and keeps the number.

/// The prefix of the segment that carries a line number.
const MARKER: &str = "__layers_line_";

/// The line number carried by a marker segment, or `None` for any other identifier.
pub(crate) fn marker_line(ident: &str) -> Option<usize> {
    ident.strip_prefix(MARKER)?.parse().ok()
}

/// What the last significant token was, to tell a path's first segment from a later one,
/// a method call (`.collect::<T>()`) or a macro variable (`$crate::x`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// `.` (a field or method access).
    Dot,
    /// `$` (a macro variable such as `$crate`).
    Dollar,
    /// `::` (the identifier is a later segment of a path).
    PathSep,
    /// Anything else.
    Other,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Returns `src` with a line marker after the first segment of every path in code
/// (comments, string and character literals are copied untouched).
pub(crate) fn instrument(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = String::with_capacity(src.len() + src.len() / 4);
    let mut line = 1;
    let mut prev = Prev::Other;
    let mut i = 0;
    // Copies chars[from..to] to the output, counting lines.
    let copy = |out: &mut String, line: &mut usize, from: usize, to: usize| {
        for &c in &chars[from..to.min(chars.len())] {
            if c == '\n' {
                *line += 1;
            }
            out.push(c);
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            copy(&mut out, &mut line, start, i);
            continue;
        }
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            copy(&mut out, &mut line, start, i);
            continue;
        }
        if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            copy(&mut out, &mut line, start, i);
            continue;
        }
        if c == '"' {
            i = skip_string(&chars, i + 1);
            copy(&mut out, &mut line, start, i);
            prev = Prev::Other;
            continue;
        }
        if c == '\'' {
            i = skip_quote(&chars, i);
            copy(&mut out, &mut line, start, i);
            prev = Prev::Other;
            continue;
        }
        if c.is_ascii_digit() {
            i += 1;
            while i < chars.len()
                && (is_ident_continue(chars[i]) || chars[i] == '.' && at(i + 1).is_ascii_digit())
            {
                i += 1;
            }
            copy(&mut out, &mut line, start, i);
            prev = Prev::Other;
            continue;
        }
        if is_ident_start(c) {
            // Raw identifier `r#name`.
            if c == 'r' && at(i + 1) == '#' && is_ident_start(at(i + 2)) {
                i += 2;
            }
            while i < chars.len() && is_ident_continue(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match (word.as_str(), at(i)) {
                ("b", '\'') => {
                    i = skip_quote(&chars, i);
                    copy(&mut out, &mut line, start, i);
                    prev = Prev::Other;
                    continue;
                }
                ("b" | "c", '"') => {
                    i = skip_string(&chars, i + 1);
                    copy(&mut out, &mut line, start, i);
                    prev = Prev::Other;
                    continue;
                }
                ("r" | "br" | "cr", '"' | '#') => {
                    if let Some(end) = skip_raw_string(&chars, i) {
                        i = end;
                        copy(&mut out, &mut line, start, i);
                        prev = Prev::Other;
                        continue;
                    }
                }
                _ => {}
            }
            copy(&mut out, &mut line, start, i);
            if !matches!(prev, Prev::Dot | Prev::Dollar | Prev::PathSep)
                && starts_path_tail(&chars, i)
            {
                out.push_str("::");
                out.push_str(MARKER);
                out.push_str(&line.to_string());
            }
            prev = Prev::Other;
            continue;
        }
        if c == ':' && at(i + 1) == ':' {
            i += 2;
            prev = Prev::PathSep;
        } else if c == '.' && at(i + 1) == '.' {
            i += 2;
            prev = Prev::Other;
        } else {
            i += 1;
            prev = match c {
                '.' => Prev::Dot,
                '$' => Prev::Dollar,
                _ => Prev::Other,
            };
        }
        copy(&mut out, &mut line, start, i);
    }
    out
}

/// Whether `chars[i..]` is whitespace, `::`, whitespace and then an identifier, `{` or `*`
/// (so that an extra segment after the identifier before it keeps the path valid).
fn starts_path_tail(chars: &[char], mut i: usize) -> bool {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    if chars.get(i) != Some(&':') || chars.get(i + 1) != Some(&':') {
        return false;
    }
    i += 2;
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    chars
        .get(i)
        .is_some_and(|&c| is_ident_start(c) || c == '{' || c == '*')
}

/// The index after the closing quote of a string whose body starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// The index after a character literal or a lifetime starting with the `'` at `i`.
fn skip_quote(chars: &[char], i: usize) -> usize {
    let at = |j: usize| chars.get(j).copied().unwrap_or('\0');
    if at(i + 1) == '\\' {
        // An escaped character: `'\n'`, `'\''`, `'\u{1F600}'`.
        let mut j = i + 3;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return (j + 1).min(chars.len());
    }
    if at(i + 2) == '\'' {
        return i + 3;
    }
    // A lifetime or a label.
    let mut j = i + 1;
    while j < chars.len() && is_ident_continue(chars[j]) {
        j += 1;
    }
    j
}

/// The index after a raw string whose hashes or quote start at `i`, or `None` when it is
/// not one (`r#name` is a raw identifier, handled by the caller).
fn skip_raw_string(chars: &[char], mut i: usize) -> Option<usize> {
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}
