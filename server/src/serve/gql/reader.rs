//! The parser's reading head over the tokens: keywords compared ignoring case, "expected …"
//! errors at the token that is not, the nesting depth bounded, and the request's bindings
//! resolved (each positional use remembered: the service refuses an unused one)
//! and its `allow_literals` enforced.

use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Status;

use crate::serve::gql::lexer::{Pos, Symbol, Tok, Token, error};
use crate::serve::request::invalid;
use pb::gql_query_parameter::ParameterType;

/// How deep parentheses and `ARRAY(…)` may nest: past it a text is refused, so that no
/// input recurses without bound.
pub(super) const MAX_DEPTH: usize = 100;

/// Words that are never a name without backquotes.
const RESERVED: &[&str] = &[
    "aggregate",
    "and",
    "as",
    "asc",
    "by",
    "desc",
    "distinct",
    "false",
    "from",
    "has",
    "in",
    "is",
    "limit",
    "not",
    "null",
    "offset",
    "on",
    "or",
    "order",
    "over",
    "select",
    "true",
    "where",
];

/// What a binding holds.
pub(super) enum Bound {
    Value(pb::Value),
    Cursor(Vec<u8>),
}

pub(super) struct Reader<'a> {
    tokens: std::vec::IntoIter<Token>,
    /// The next token, and the one after it (a value starts with `KEY (`).
    head: [Token; 2],
    depth: usize,
    query: &'a pb::GqlQuery,
    used_positional: Vec<bool>,
    /// The partition a key without `PROJECT(…)` or `NAMESPACE(…)` is in: the request's.
    pub(super) partition: pb::PartitionId,
}

impl<'a> Reader<'a> {
    pub(super) fn new(
        tokens: Vec<Token>,
        query: &'a pb::GqlQuery,
        partition: pb::PartitionId,
    ) -> Reader<'a> {
        let mut tokens = tokens.into_iter();
        let mut next = || {
            tokens.next().unwrap_or(Token {
                tok: Tok::End,
                at: Pos { line: 1, column: 1 },
            })
        };
        let head = [next(), next()];
        Reader {
            tokens,
            head,
            depth: 0,
            query,
            used_positional: vec![false; query.positional_bindings.len()],
            partition,
        }
    }

    pub(super) fn peek(&self) -> &Tok {
        &self.head[0].tok
    }

    pub(super) fn at(&self) -> Pos {
        self.head[0].at
    }

    /// The token after the next.
    pub(super) fn second(&self) -> &Tok {
        &self.head[1].tok
    }

    /// The next token, taken; [`Tok::End`] stays at the end.
    pub(super) fn bump(&mut self) -> Token {
        let end = Token {
            tok: Tok::End,
            at: self.head[1].at,
        };
        let following = match self.head[1].tok {
            Tok::End => end.clone(),
            _ => self.tokens.next().unwrap_or(end),
        };
        let second = std::mem::replace(&mut self.head[1], following);
        std::mem::replace(&mut self.head[0], second)
    }

    /// Whether the next token is the keyword `word` (lowercase).
    pub(super) fn is(&self, word: &str) -> bool {
        matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case(word))
    }

    /// Whether the next token is the function `word` (lowercase): the word, then `(`.
    pub(super) fn is_call(&self, word: &str) -> bool {
        self.is(word) && *self.second() == Tok::Symbol(Symbol::Open)
    }

    pub(super) fn eat(&mut self, word: &str) -> bool {
        let found = self.is(word);
        if found {
            self.bump();
        }
        found
    }

    pub(super) fn expect(&mut self, word: &str) -> Result<(), Status> {
        match self.eat(word) {
            true => Ok(()),
            false => Err(self.expected(&word.to_ascii_uppercase())),
        }
    }

    pub(super) fn eat_symbol(&mut self, symbol: Symbol) -> bool {
        let found = *self.peek() == Tok::Symbol(symbol);
        if found {
            self.bump();
        }
        found
    }

    pub(super) fn expect_symbol(&mut self, symbol: Symbol) -> Result<(), Status> {
        match self.eat_symbol(symbol) {
            true => Ok(()),
            false => Err(self.expected(&format!("`{}`", symbol.text()))),
        }
    }

    /// The mistake at the next token: `what` was expected there.
    pub(super) fn expected(&self, what: &str) -> Status {
        error(
            self.at(),
            format_args!("expected {what}, found {}", self.peek()),
        )
    }

    /// Whether the next token is a name: an unreserved word or a backquoted name.
    pub(super) fn at_name(&self) -> bool {
        match self.peek() {
            Tok::Word(w) => !RESERVED.iter().any(|r| w.eq_ignore_ascii_case(r)),
            Tok::Quoted(_) => true,
            _ => false,
        }
    }

    /// A name (of a kind, a property, an alias); `what` says which, for the error.
    pub(super) fn name(&mut self, what: &str) -> Result<String, Status> {
        if !self.at_name() {
            return Err(self.expected(what));
        }
        match self.bump().tok {
            Tok::Word(name) | Tok::Quoted(name) => Ok(name),
            _ => Err(self.expected(what)),
        }
    }

    /// One level deeper into parentheses or an array; refused past [`MAX_DEPTH`].
    pub(super) fn deeper(&mut self) -> Result<(), Status> {
        self.depth += 1;
        match self.depth > MAX_DEPTH {
            true => Err(error(
                self.at(),
                format_args!("nested more than {MAX_DEPTH} deep"),
            )),
            false => Ok(()),
        }
    }

    pub(super) fn shallower(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// A literal at `at` (its text `text`), refused when the request does not allow them.
    pub(super) fn literal(&self, at: Pos, text: &str) -> Result<(), Status> {
        match self.query.allow_literals {
            true => Ok(()),
            false => Err(error(
                at,
                format_args!(
                    "the literal {text} is not allowed: the request sets allow_literals to false; use a binding"
                ),
            )),
        }
    }

    /// What the binding token `tok` at `at` holds.
    pub(super) fn bound(&mut self, tok: &Tok, at: Pos) -> Result<Bound, Status> {
        let (parameter, shown) = match tok {
            Tok::Named(name) => {
                let Some((name, parameter)) = self.query.named_bindings.get_key_value(name) else {
                    return Err(error(at, format_args!("no named binding @{name}")));
                };
                (parameter, format!("@{name}"))
            }
            Tok::Positional(n) => {
                let Some(parameter) = self.query.positional_bindings.get(n - 1) else {
                    return Err(error(at, format_args!("no positional binding @{n}")));
                };
                self.used_positional[n - 1] = true;
                (parameter, format!("@{n}"))
            }
            _ => return Err(error(at, "expected a binding")),
        };
        match &parameter.parameter_type {
            Some(ParameterType::Value(value)) => Ok(Bound::Value(value.clone())),
            Some(ParameterType::Cursor(cursor)) => Ok(Bound::Cursor(cursor.clone())),
            None => Err(error(at, format_args!("the binding {shown} holds nothing"))),
        }
    }

    /// The end of the text, with every positional binding used (the service refuses an
    /// unused one; an unused named binding it lets pass).
    pub(super) fn finish(self) -> Result<(), Status> {
        if *self.peek() != Tok::End {
            return Err(self.expected("the end of the query"));
        }
        match self.used_positional.iter().position(|used| !used) {
            Some(n) => Err(invalid(format!(
                "GQL query error: the positional binding @{} is not used",
                n + 1
            ))),
            None => Ok(()),
        }
    }
}
