//! GQL text cut into tokens, each with the line and column it starts at (1-based, counted in
//! characters), so that every mistake names where it is. One pass, no backtracking: the work
//! is linear in the text.

use std::fmt;

use tonic::Status;

use crate::serve::request::invalid;

/// Where a token starts: line and column, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    pub(super) line: usize,
    pub(super) column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// `INVALID_ARGUMENT` naming the place of a mistake in the text.
pub(super) fn error(at: Pos, message: impl fmt::Display) -> Status {
    invalid(format!("GQL query error at {at}: {message}"))
}

/// The punctuation of GQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Symbol {
    Star,
    Comma,
    Open,
    Close,
    Plus,
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Symbol {
    pub(super) fn text(self) -> &'static str {
        match self {
            Symbol::Star => "*",
            Symbol::Comma => ",",
            Symbol::Open => "(",
            Symbol::Close => ")",
            Symbol::Plus => "+",
            Symbol::Equal => "=",
            Symbol::NotEqual => "!=",
            Symbol::Less => "<",
            Symbol::LessOrEqual => "<=",
            Symbol::Greater => ">",
            Symbol::GreaterOrEqual => ">=",
        }
    }
}

/// One token. Keywords are words: the parser compares them ignoring case.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// An unquoted name or a keyword.
    Word(String),
    /// A name in backquotes (`` `my kind` ``).
    Quoted(String),
    /// A string in single or double quotes.
    Str(String),
    Int(i64),
    Double(f64),
    /// `@name`
    Named(String),
    /// `@1`, from 1.
    Positional(usize),
    Symbol(Symbol),
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "`{w}`"),
            Tok::Quoted(q) => write!(f, "the quoted name `{q}`"),
            Tok::Str(s) => write!(f, "the string {s:?}"),
            Tok::Int(i) => write!(f, "the integer {i}"),
            Tok::Double(d) => write!(f, "the number {d}"),
            Tok::Named(n) => write!(f, "the binding @{n}"),
            Tok::Positional(n) => write!(f, "the binding @{n}"),
            Tok::Symbol(s) => write!(f, "`{}`", s.text()),
            Tok::End => f.write_str("the end of the query"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) at: Pos,
}

/// The characters of the text with their positions.
struct Chars<'a> {
    rest: std::iter::Peekable<std::str::Chars<'a>>,
    at: Pos,
}

impl Chars<'_> {
    fn peek(&mut self) -> Option<char> {
        self.rest.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.rest.next()?;
        match c {
            '\n' => {
                self.at.line += 1;
                self.at.column = 1;
            }
            _ => self.at.column += 1,
        }
        Some(c)
    }

    fn take_while(&mut self, into: &mut String, keep: impl Fn(char) -> bool) {
        while let Some(c) = self.peek().filter(|&c| keep(c)) {
            into.push(c);
            self.bump();
        }
    }
}

fn name_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$'
}

fn name_part(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '$' | '.')
}

/// The tokens of `text`, ending with [`Tok::End`].
pub(super) fn tokens(text: &str) -> Result<Vec<Token>, Status> {
    let mut chars = Chars {
        rest: text.chars().peekable(),
        at: Pos { line: 1, column: 1 },
    };
    let mut out = Vec::new();
    loop {
        chars.take_while(&mut String::new(), char::is_whitespace);
        let at = chars.at;
        let Some(c) = chars.peek() else {
            out.push(Token { tok: Tok::End, at });
            return Ok(out);
        };
        let tok = match c {
            '\'' | '"' => Tok::Str(quoted(&mut chars, c)?),
            '`' => Tok::Quoted(quoted(&mut chars, c)?),
            '@' => binding(&mut chars)?,
            '0'..='9' | '.' => number(&mut chars, String::new(), at)?,
            '+' | '-' => {
                chars.bump();
                match chars.peek() {
                    Some('0'..='9' | '.') => number(&mut chars, c.to_string(), at)?,
                    _ if c == '+' => Tok::Symbol(Symbol::Plus),
                    _ => return Err(error(at, "expected a number after `-`")),
                }
            }
            c if name_start(c) => {
                let mut word = String::new();
                chars.take_while(&mut word, name_part);
                Tok::Word(word)
            }
            _ => Tok::Symbol(symbol(&mut chars, at)?),
        };
        out.push(Token { tok, at });
    }
}

fn symbol(chars: &mut Chars<'_>, at: Pos) -> Result<Symbol, Status> {
    let c = chars.bump().unwrap_or_default();
    let then_equal = |chars: &mut Chars<'_>| chars.peek() == Some('=') && chars.bump().is_some();
    Ok(match c {
        '*' => Symbol::Star,
        ',' => Symbol::Comma,
        '(' => Symbol::Open,
        ')' => Symbol::Close,
        '=' => Symbol::Equal,
        '!' if then_equal(chars) => Symbol::NotEqual,
        '<' if then_equal(chars) => Symbol::LessOrEqual,
        '<' => Symbol::Less,
        '>' if then_equal(chars) => Symbol::GreaterOrEqual,
        '>' => Symbol::Greater,
        other => return Err(error(at, format_args!("unexpected character {other:?}"))),
    })
}

/// A quoted string or name: the quote doubled stands for itself; a backslash escapes.
fn quoted(chars: &mut Chars<'_>, quote: char) -> Result<String, Status> {
    let start = chars.at;
    chars.bump();
    let mut text = String::new();
    loop {
        let at = chars.at;
        match chars.bump() {
            None => return Err(error(start, format_args!("no closing {quote}"))),
            Some(c) if c == quote => match chars.peek() {
                Some(next) if next == quote => {
                    chars.bump();
                    text.push(quote);
                }
                _ => return Ok(text),
            },
            Some('\\') => text.push(match chars.bump() {
                Some('n') => '\n',
                Some('r') => '\r',
                Some('t') => '\t',
                Some('b') => '\u{8}',
                Some('f') => '\u{c}',
                Some('0') => '\0',
                Some(c @ ('\\' | '\'' | '"' | '`')) => c,
                _ => return Err(error(at, "unknown escape after `\\`")),
            }),
            Some(c) => text.push(c),
        }
    }
}

fn binding(chars: &mut Chars<'_>) -> Result<Tok, Status> {
    let at = chars.at;
    chars.bump();
    let mut name = String::new();
    match chars.peek() {
        Some('0'..='9') => {
            chars.take_while(&mut name, |c| c.is_ascii_digit());
            match name.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Tok::Positional(n)),
                _ => Err(error(at, "a positional binding counts from @1")),
            }
        }
        Some(c) if name_start(c) => {
            chars.take_while(&mut name, name_part);
            Ok(Tok::Named(name))
        }
        _ => Err(error(at, "expected a binding's name or number after `@`")),
    }
}

/// An integer or a double at `at`: digits, a fraction, an exponent; `sign` is what came
/// before.
fn number(chars: &mut Chars<'_>, sign: String, at: Pos) -> Result<Tok, Status> {
    let mut text = sign;
    let digits = |c: char| c.is_ascii_digit();
    chars.take_while(&mut text, digits);
    let mut double = false;
    if chars.peek() == Some('.') {
        double = true;
        chars.bump();
        text.push('.');
        chars.take_while(&mut text, digits);
    }
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Err(error(at, "expected a digit"));
    }
    if let Some(e @ ('e' | 'E')) = chars.peek() {
        double = true;
        chars.bump();
        text.push(e);
        if let Some(s @ ('+' | '-')) = chars.peek() {
            chars.bump();
            text.push(s);
        }
        let before = text.len();
        chars.take_while(&mut text, digits);
        if text.len() == before {
            return Err(error(chars.at, "expected the exponent's digits"));
        }
    }
    match double {
        true => text.parse().map(Tok::Double).ok(),
        false => text.parse().map(Tok::Int).ok(),
    }
    .ok_or_else(|| error(at, format_args!("invalid number {text}")))
}
