//! The small type language that JSON Schemas become and both dialects render.

use serde_json::Value;

/// An `enum` with more values than this is typed by the values' kinds (`string`, `number`...):
/// a union that long helps no reader, and a module must stay within what the host's
/// transpiler accepts (at most 4,096 operators in one statement).
pub const MAX_LITERALS: usize = 256;

/// Which of a tool's schemas a type comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// `inputSchema`: the arguments.
    Args,
    /// `outputSchema`: the structured result.
    Result,
}

impl Role {
    /// The tool field the schema comes from.
    pub fn field(self) -> &'static str {
        match self {
            Role::Args => "inputSchema",
            Role::Result => "outputSchema",
        }
    }
}

/// A named type: a schema's root (`def: None`) or one of its `$ref` targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TypeRef {
    /// The schema it belongs to.
    pub role: Role,
    /// The index into [`Converted::defs`](crate::schema::Converted::defs), or `None` for the root.
    pub def: Option<usize>,
}

/// A type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Anything (`true`, `{}`, a part that could not be typed).
    Unknown,
    /// Nothing (`false`, an empty `enum`).
    Never,
    /// `null`.
    Null,
    /// `undefined`: only to widen an index signature over optional properties.
    Undefined,
    /// `boolean`.
    Boolean,
    /// `number` (JSON Schema's `number` and `integer`).
    Number,
    /// `string`.
    String,
    /// One JSON value (`const`, an `enum` member).
    Literal(Value),
    /// `T[]`.
    Array(Box<Ty>),
    /// `[A, B?, ...C[]]`.
    Tuple(Tuple),
    /// `{ a: A; b?: B; [key: string]: C }`.
    Object(Object),
    /// `A | B`.
    Union(Vec<Ty>),
    /// `A & B`.
    Intersection(Vec<Ty>),
    /// A named type.
    Ref(TypeRef),
}

/// A tuple type.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuple {
    /// The positional items.
    pub items: Vec<Ty>,
    /// How many leading items must be present (`minItems`; all of them when it is absent).
    pub required: usize,
    /// The type of further items, if any are allowed.
    pub rest: Option<Box<Ty>>,
}

/// An object type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    /// The named properties: required ones first in `required` order, then the rest by name.
    pub props: Vec<Prop>,
    /// The type of any other key, from `additionalProperties` and `patternProperties`.
    pub index: Option<Index>,
}

/// One property.
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    /// The key, as the server spelled it.
    pub key: String,
    /// Whether it may be left out.
    pub optional: bool,
    /// Its type.
    pub ty: Ty,
    /// What its schema says about it.
    pub doc: Doc,
}

/// An index signature.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    /// The value type, widened to cover the named properties so the type stays valid.
    pub ty: Box<Ty>,
    /// The declared value type, before widening, for the doc comment.
    pub declared: Box<Ty>,
    /// The `patternProperties` patterns, sorted.
    pub patterns: Vec<String>,
}

/// What a schema says about a value beyond its type: text and constraints for doc comments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Doc {
    /// `title`.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// Constraints and annotations as (keyword, value text), in a fixed keyword order; values
    /// are raw text for the comment sanitizer.
    pub facts: Vec<(&'static str, String)>,
    /// `deprecated: true`.
    pub deprecated: bool,
}

impl Doc {
    /// Whether there is nothing to say.
    pub fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.description.is_none()
            && self.facts.is_empty()
            && !self.deprecated
    }
}

/// A union, flattened and deduplicated: `unknown` swallows it, `never` drops out.
pub fn union(members: Vec<Ty>) -> Ty {
    let mut out = Members::default();
    for member in members {
        match member {
            Ty::Unknown => return Ty::Unknown,
            Ty::Never => {}
            Ty::Union(inner) => inner.into_iter().for_each(|ty| out.push(ty)),
            ty => out.push(ty),
        }
    }
    match out.list.len() {
        0 => Ty::Never,
        1 => out.list.pop().unwrap_or(Ty::Never),
        _ => Ty::Union(out.list),
    }
}

/// Distinct members in first-seen order. Literals are compared by their canonical JSON, in a
/// set, so that an `enum` of thousands of values stays linear.
#[derive(Default)]
struct Members {
    list: Vec<Ty>,
    literals: std::collections::HashSet<String>,
}

impl Members {
    fn push(&mut self, ty: Ty) {
        let fresh = match &ty {
            Ty::Literal(value) => self.literals.insert(crate::text::canonical_json(value)),
            ty => !self.list.contains(ty),
        };
        if fresh {
            self.list.push(ty);
        }
    }
}

/// An intersection, flattened and deduplicated: `unknown` drops out, `never` swallows it.
pub fn intersection(members: Vec<Ty>) -> Ty {
    let mut out = Members::default();
    for member in members {
        match member {
            Ty::Unknown => {}
            Ty::Never => return Ty::Never,
            Ty::Intersection(inner) => inner.into_iter().for_each(|ty| out.push(ty)),
            ty => out.push(ty),
        }
    }
    match out.list.len() {
        0 => Ty::Unknown,
        1 => out.list.pop().unwrap_or(Ty::Unknown),
        _ => Ty::Intersection(out.list),
    }
}
