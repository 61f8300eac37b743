//! The naming rules of Cloud Datastore and Firestore, in one place.
//!
//! Both the `#[derive(Entity)]` macro (at compile time) and the `datastore-entity`
//! runtime (for names built while the program runs) call these functions, so the
//! two can never disagree about what a valid name is. The checks are `const fn`,
//! which also lets literal names be checked during constant evaluation.
//!
//! ```
//! use datastore_entity_names::{check, NameRole, NameViolation};
//!
//! assert_eq!(check(NameRole::Property, "displayName"), Ok(()));
//! assert_eq!(check(NameRole::Property, "user.name"), Err(NameViolation::Dot));
//! assert_eq!(check(NameRole::Kind, "a/b"), Err(NameViolation::Slash));
//! ```
#![no_std]

extern crate alloc;

use alloc::string::String;
use core::fmt;

/// Longest name, in UTF-8 bytes, that the service accepts for kinds, properties and key names (R-N7).
pub const MAX_NAME_BYTES: usize = 1500;

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 100;

/// What a name is used for; each role has its own set of rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameRole {
    /// The kind of an entity (R-N2, R-N5, R-N7).
    Kind,
    /// A property (Firestore: field) name (R-N3, R-N4, R-N5, R-N7).
    Property,
    /// The custom name of a key (R-N2, R-N5, R-N6, R-N7).
    KeyName,
    /// A namespace: `[0-9A-Za-z._-]{0,100}`, not reserved (R-N5); empty means the default namespace.
    Namespace,
}

impl NameRole {
    /// How the role is called in messages ("kind", "property name", ...).
    pub const fn noun(self) -> &'static str {
        match self {
            NameRole::Kind => "kind",
            NameRole::Property => "property name",
            NameRole::KeyName => "key name",
            NameRole::Namespace => "namespace",
        }
    }
}

/// One broken naming rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameViolation {
    /// R-N1: the bytes are not valid UTF-8; the first `valid_up_to` bytes are.
    InvalidUtf8 {
        /// Length of the longest valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// R-N2: a `/` in a kind or key name.
    Slash,
    /// R-N3: a `.` in a property name.
    Dot,
    /// R-N4: a character Firestore field paths need escaped: `[`, `]`, `*` or a backtick.
    FirestoreSpecial {
        /// The offending character.
        ch: char,
    },
    /// R-N5: the name matches `__.*__`, which the service reserves.
    Reserved,
    /// R-N6: a key name that is exactly `.` or `..`.
    DotOrDotDot,
    /// R-N7: the name is empty.
    Empty,
    /// R-N7: the name is longer than the limit, in bytes.
    TooLong {
        /// Length of the name, in bytes.
        len: usize,
        /// The limit for this role, in bytes.
        max: usize,
    },
    /// A namespace character outside `[0-9A-Za-z._-]`.
    NamespaceChar {
        /// The offending character.
        ch: char,
    },
}

impl NameViolation {
    /// The id of the rule in the README's rules table (e.g. `"R-N3"`).
    pub const fn rule(self) -> &'static str {
        match self {
            NameViolation::InvalidUtf8 { .. } => "R-N1",
            NameViolation::Slash => "R-N2",
            NameViolation::Dot => "R-N3",
            NameViolation::FirestoreSpecial { .. } => "R-N4",
            NameViolation::Reserved => "R-N5",
            NameViolation::DotOrDotDot => "R-N6",
            NameViolation::Empty | NameViolation::TooLong { .. } => "R-N7",
            NameViolation::NamespaceChar { .. } => "R-N7",
        }
    }

    /// A short statement of the rule, for `panic!` messages in constant evaluation.
    pub const fn as_str(self) -> &'static str {
        match self {
            NameViolation::InvalidUtf8 { .. } => "R-N1: names must be valid UTF-8",
            NameViolation::Slash => "R-N2: kinds and key names must not contain `/`",
            NameViolation::Dot => {
                "R-N3: property names must not contain `.` (it collides with embedded-entity paths)"
            }
            NameViolation::FirestoreSpecial { .. } => {
                "R-N4: property names must not contain `[`, `]`, `*` or a backtick"
            }
            NameViolation::Reserved => "R-N5: names matching `__.*__` are reserved",
            NameViolation::DotOrDotDot => "R-N6: key names must not be `.` or `..`",
            NameViolation::Empty => "R-N7: names must not be empty",
            NameViolation::TooLong { .. } => "R-N7: names must be at most 1,500 bytes",
            NameViolation::NamespaceChar { .. } => {
                "namespaces may only contain ASCII letters, digits, `.`, `_` and `-`"
            }
        }
    }
}

impl fmt::Display for NameViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NameViolation::InvalidUtf8 { valid_up_to } => write!(
                f,
                "is not valid UTF-8 (the bytes after the first {valid_up_to} are not) [R-N1]"
            ),
            NameViolation::Slash => f.write_str("contains `/` [R-N2]"),
            NameViolation::Dot => f.write_str(
                "contains `.`, which collides with the `outer.inner` paths of embedded entities [R-N3]",
            ),
            NameViolation::FirestoreSpecial { ch } => write!(
                f,
                "contains `{ch}`, which Firestore field paths can only use escaped [R-N4]"
            ),
            NameViolation::Reserved => {
                f.write_str("matches `__.*__`, which is reserved by the service [R-N5]")
            }
            NameViolation::DotOrDotDot => f.write_str("is `.` or `..`, which are not allowed [R-N6]"),
            NameViolation::Empty => f.write_str("is empty [R-N7]"),
            NameViolation::TooLong { len, max } => {
                write!(f, "is {len} bytes long, more than the {max} allowed [R-N7]")
            }
            NameViolation::NamespaceChar { ch } => write!(
                f,
                "contains `{}`; namespaces may only use ASCII letters, digits, `.`, `_` and `-`",
                ch.escape_debug()
            ),
        }
    }
}

/// Checks `name` against every rule of `role`; returns the first rule it breaks.
pub const fn check(role: NameRole, name: &str) -> Result<(), NameViolation> {
    let bytes = name.as_bytes();
    let max = match role {
        NameRole::Namespace => MAX_NAMESPACE_BYTES,
        _ => MAX_NAME_BYTES,
    };
    if bytes.is_empty() {
        // The empty namespace is the default namespace.
        return match role {
            NameRole::Namespace => Ok(()),
            _ => Err(NameViolation::Empty),
        };
    }
    if bytes.len() > max {
        return Err(NameViolation::TooLong {
            len: bytes.len(),
            max,
        });
    }
    if is_reserved(bytes) {
        return Err(NameViolation::Reserved);
    }
    if let NameRole::KeyName = role
        && (is(bytes, b".") || is(bytes, b".."))
    {
        return Err(NameViolation::DotOrDotDot);
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match role {
            NameRole::Kind | NameRole::KeyName if b == b'/' => return Err(NameViolation::Slash),
            NameRole::Property if b == b'.' => return Err(NameViolation::Dot),
            NameRole::Property if matches!(b, b'[' | b']' | b'*' | b'`') => {
                return Err(NameViolation::FirestoreSpecial { ch: b as char });
            }
            NameRole::Namespace
                if !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) =>
            {
                return Err(NameViolation::NamespaceChar {
                    ch: first_char_at(bytes, i),
                });
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Checks a name given as bytes: R-N1 (UTF-8) first, then the rules of `role`.
pub fn check_bytes(role: NameRole, bytes: &[u8]) -> Result<&str, NameViolation> {
    let name = core::str::from_utf8(bytes).map_err(|e| NameViolation::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    check(role, name).map(|()| name)
}

/// A close name that follows the rules of `role`, to suggest in a help line; `None` when
/// no mechanical fix exists (an empty name, `.` or `..`).
pub fn suggest(role: NameRole, name: &str) -> Option<String> {
    let mut fixed: String = name
        .chars()
        .map(|c| match (role, c) {
            (NameRole::Kind | NameRole::KeyName, '/') => '_',
            (NameRole::Property, '.' | '[' | ']' | '*' | '`') => '_',
            (NameRole::Namespace, c)
                if !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) =>
            {
                '_'
            }
            (_, c) => c,
        })
        .collect();
    if is_reserved(fixed.as_bytes()) {
        fixed = String::from(&fixed[2..fixed.len() - 2]);
    }
    (fixed != name && check(role, &fixed).is_ok()).then_some(fixed)
}

/// Whether `name` matches `__.*__`, which the service reserves (R-N5).
pub const fn is_reserved_name(name: &str) -> bool {
    is_reserved(name.as_bytes())
}

const fn is_reserved(bytes: &[u8]) -> bool {
    let n = bytes.len();
    n >= 4 && bytes[0] == b'_' && bytes[1] == b'_' && bytes[n - 2] == b'_' && bytes[n - 1] == b'_'
}

const fn is(bytes: &[u8], other: &[u8]) -> bool {
    if bytes.len() != other.len() {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != other[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The character starting at byte `i` of a valid UTF-8 string (decoded here because `check`
/// is a `const fn`, where `str::chars` is not available).
const fn first_char_at(bytes: &[u8], i: usize) -> char {
    let b = bytes[i];
    let (len, mut code) = match b {
        0x00..=0x7f => return b as char,
        0xf0.. => (4, (b & 0x07) as u32),
        0xe0.. => (3, (b & 0x0f) as u32),
        _ => (2, (b & 0x1f) as u32),
    };
    let mut k = 1;
    while k < len {
        if i + k >= bytes.len() {
            return char::REPLACEMENT_CHARACTER;
        }
        code = (code << 6) | (bytes[i + k] & 0x3f) as u32;
        k += 1;
    }
    match char::from_u32(code) {
        Some(c) => c,
        None => char::REPLACEMENT_CHARACTER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn a_namespace_character_is_named_as_it_is() {
        // Issue #26: any character outside ASCII was shown as `�`.
        for (name, ch) in [
            ("café", 'é'),
            ("a€", '€'),
            ("x🦀y", '🦀'),
            ("tab\there", '\t'),
        ] {
            assert_eq!(
                check(NameRole::Namespace, name),
                Err(NameViolation::NamespaceChar { ch }),
                "{name}"
            );
        }
        let shown = NameViolation::NamespaceChar { ch: '\0' }.to_string();
        assert!(shown.contains("`\\0`"), "{shown}");
    }

    #[test]
    fn role_rules() {
        // R-N2
        assert_eq!(check(NameRole::Kind, "a/b"), Err(NameViolation::Slash));
        assert_eq!(check(NameRole::Property, "a/b"), Ok(()));
        // R-N3, R-N4
        assert_eq!(check(NameRole::Property, "a.b"), Err(NameViolation::Dot));
        assert_eq!(check(NameRole::Kind, "a.b"), Ok(()));
        for ch in ['[', ']', '*', '`'] {
            let name = alloc::format!("a{ch}b");
            assert_eq!(
                check(NameRole::Property, &name),
                Err(NameViolation::FirestoreSpecial { ch })
            );
        }
        // R-N5
        assert_eq!(check(NameRole::Kind, "__x__"), Err(NameViolation::Reserved));
        assert_eq!(check(NameRole::Kind, "____"), Err(NameViolation::Reserved));
        assert_eq!(check(NameRole::Kind, "___"), Ok(()));
        assert_eq!(check(NameRole::Kind, "__x_"), Ok(()));
        // R-N6
        assert_eq!(
            check(NameRole::KeyName, ".."),
            Err(NameViolation::DotOrDotDot)
        );
        assert_eq!(check(NameRole::KeyName, "..."), Ok(()));
        // R-N7
        assert_eq!(check(NameRole::Property, ""), Err(NameViolation::Empty));
        assert_eq!(check(NameRole::Namespace, ""), Ok(()));
        let edge = "é".repeat(750);
        assert_eq!(check(NameRole::KeyName, &edge), Ok(()));
        assert_eq!(
            check(NameRole::KeyName, &alloc::format!("{edge}x")),
            Err(NameViolation::TooLong {
                len: 1501,
                max: 1500
            })
        );
        // R-N1
        assert_eq!(
            check_bytes(NameRole::Kind, b"ab\xff"),
            Err(NameViolation::InvalidUtf8 { valid_up_to: 2 })
        );
        assert_eq!(check_bytes(NameRole::Kind, "añ".as_bytes()), Ok("añ"));
        // Namespaces
        assert_eq!(
            check(NameRole::Namespace, "a b"),
            Err(NameViolation::NamespaceChar { ch: ' ' })
        );
        assert_eq!(check(NameRole::Namespace, "tenant-a.b_c"), Ok(()));
    }

    #[test]
    fn suggestions_follow_the_rules() {
        assert_eq!(
            suggest(NameRole::Property, "user.name").as_deref(),
            Some("user_name")
        );
        assert_eq!(suggest(NameRole::Kind, "__meta__").as_deref(), Some("meta"));
        assert_eq!(suggest(NameRole::Kind, "a/b").as_deref(), Some("a_b"));
        assert_eq!(suggest(NameRole::KeyName, ".."), None);
        assert_eq!(suggest(NameRole::Kind, "fine"), None);
    }
}
