//! The shape of a JSON value: its types, field names, which fields may be missing and what its
//! arrays hold, never a value. Shapes merge (a lattice: a merge only widens), so the shape of a
//! tool's results is the merge of the shapes of each result.
//!
//! A downstream server's output is hostile, so every shape is bounded: depth, fields per object,
//! key length, union members and nodes in all. What a bound cuts becomes `Unknown` (or, for an
//! object with too many or too long keys, a map whose keys are not kept).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// How deep a shape goes; below it, `Unknown`.
pub const MAX_DEPTH: usize = 6;
/// The most fields an object keeps; one with more becomes a map of its values' shape.
pub const MAX_FIELDS: usize = 64;
/// The longest key kept, in bytes; an object with a longer one becomes a map (such a key is
/// data, not a field name).
pub const MAX_KEY_BYTES: usize = 64;
/// The most kinds a union holds (`string | null` is two); past it, `Unknown`.
pub const MAX_UNION: usize = 4;
/// The most nodes in one tool's shape; past it, the whole shape is `Unknown`.
pub const MAX_NODES: usize = 256;
/// The most values read from one result (a megabyte answer costs no more than this).
pub const MAX_VISITS: usize = 4_096;
/// The most elements of one array (or values of one map) read; the rest are taken to be alike.
pub const MAX_SAMPLED: usize = 32;

/// The shape of a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Shape {
    /// Anything: cut by a bound, or too varied to say.
    Unknown,
    Null,
    Boolean,
    Number,
    String,
    /// An array; `items` is `None` while only empty arrays were seen.
    Array {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items: Option<Box<Shape>>,
    },
    /// An object with named fields.
    Object {
        fields: BTreeMap<String, Field>,
    },
    /// An object used as a map: its keys are not kept, only its values' shape.
    Map {
        values: Box<Shape>,
    },
    /// One of several kinds, each at most once, in kind order; never nested, never `Unknown`.
    Union {
        members: Vec<Shape>,
    },
}

/// A field of an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub shape: Shape,
    /// Missing from some of the objects seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl Shape {
    /// The shape of `value`, within the bounds.
    pub fn of(value: &Value) -> Shape {
        let mut budget = MAX_VISITS;
        of(value, 0, &mut budget)
    }

    /// The two shapes as one: a field missing from either is optional, arrays merge their
    /// elements, different kinds make a union (past [`MAX_UNION`] kinds, `Unknown`).
    pub fn merge(self, other: Shape) -> Shape {
        let merged = merge(self, other);
        if merged.nodes() > MAX_NODES {
            Shape::Unknown
        } else {
            merged
        }
    }

    /// How many nodes it has.
    pub fn nodes(&self) -> usize {
        1 + match self {
            Shape::Array { items: Some(items) } => items.nodes(),
            Shape::Object { fields } => fields.values().map(|f| f.shape.nodes()).sum(),
            Shape::Map { values } => values.nodes(),
            Shape::Union { members } => members.iter().map(Shape::nodes).sum(),
            _ => 0,
        }
    }

    /// How deep it goes (a scalar is 0).
    pub fn depth(&self) -> usize {
        match self {
            Shape::Array { items: Some(items) } => 1 + items.depth(),
            Shape::Object { fields } => {
                1 + fields.values().map(|f| f.shape.depth()).max().unwrap_or(0)
            }
            Shape::Map { values } => 1 + values.depth(),
            Shape::Union { members } => members.iter().map(Shape::depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// Whether it is within every bound (a shape read back from a file may not be).
    pub fn within_bounds(&self) -> bool {
        self.nodes() <= MAX_NODES && self.depth() <= MAX_DEPTH + 1 && self.well_formed()
    }

    fn well_formed(&self) -> bool {
        match self {
            Shape::Array { items: Some(items) } => items.well_formed(),
            Shape::Object { fields } => {
                fields.len() <= MAX_FIELDS
                    && fields
                        .iter()
                        .all(|(key, f)| key.len() <= MAX_KEY_BYTES && f.shape.well_formed())
            }
            Shape::Map { values } => values.well_formed(),
            Shape::Union { members } => {
                members.len() >= 2
                    && members.len() <= MAX_UNION
                    && members.windows(2).all(|w| w[0].kind() < w[1].kind())
                    && members
                        .iter()
                        .all(|m| !matches!(m, Shape::Unknown) && m.well_formed())
            }
            _ => true,
        }
    }

    /// The shape as a JSON Schema (what a dialect reads as an `outputSchema`).
    pub fn schema(&self) -> Value {
        match self {
            Shape::Unknown => json!({}),
            Shape::Null => json!({"type": "null"}),
            Shape::Boolean => json!({"type": "boolean"}),
            Shape::Number => json!({"type": "number"}),
            Shape::String => json!({"type": "string"}),
            Shape::Array { items: None } => json!({"type": "array"}),
            Shape::Array { items: Some(items) } => {
                json!({"type": "array", "items": items.schema()})
            }
            Shape::Object { fields } => {
                let mut properties = Map::with_capacity(fields.len());
                let mut required = Vec::new();
                for (key, field) in fields {
                    properties.insert(key.clone(), field.shape.schema());
                    if !field.optional {
                        required.push(Value::String(key.clone()));
                    }
                }
                let mut schema = Map::new();
                schema.insert("type".into(), json!("object"));
                schema.insert("properties".into(), Value::Object(properties));
                if !required.is_empty() {
                    schema.insert("required".into(), Value::Array(required));
                }
                Value::Object(schema)
            }
            Shape::Map { values } => {
                json!({"type": "object", "additionalProperties": values.schema()})
            }
            Shape::Union { members } => {
                json!({"anyOf": members.iter().map(Shape::schema).collect::<Vec<_>>()})
            }
        }
    }

    /// The kind a union keeps once (objects and maps are one kind).
    fn kind(&self) -> u8 {
        match self {
            Shape::Unknown => 0,
            Shape::Null => 1,
            Shape::Boolean => 2,
            Shape::Number => 3,
            Shape::String => 4,
            Shape::Array { .. } => 5,
            Shape::Object { .. } | Shape::Map { .. } => 6,
            Shape::Union { .. } => 7,
        }
    }
}

fn of(value: &Value, depth: usize, budget: &mut usize) -> Shape {
    if *budget == 0 || depth > MAX_DEPTH {
        return Shape::Unknown;
    }
    *budget -= 1;
    match value {
        Value::Null => Shape::Null,
        Value::Bool(_) => Shape::Boolean,
        Value::Number(_) => Shape::Number,
        Value::String(_) => Shape::String,
        Value::Array(items) => Shape::Array {
            items: alike(items.iter(), depth, budget).map(Box::new),
        },
        Value::Object(map) => {
            let keyed = map.len() <= MAX_FIELDS && map.keys().all(|k| k.len() <= MAX_KEY_BYTES);
            if !keyed {
                return Shape::Map {
                    values: Box::new(alike(map.values(), depth, budget).unwrap_or(Shape::Unknown)),
                };
            }
            let mut fields = BTreeMap::new();
            for (key, value) in map {
                let shape = of(value, depth + 1, budget);
                fields.insert(
                    key.clone(),
                    Field {
                        shape,
                        optional: false,
                    },
                );
            }
            Shape::Object { fields }
        }
    }
}

/// The merged shape of the first [`MAX_SAMPLED`] values, `None` when there are none.
fn alike<'a>(
    values: impl Iterator<Item = &'a Value>,
    depth: usize,
    budget: &mut usize,
) -> Option<Shape> {
    let mut merged: Option<Shape> = None;
    for value in values.take(MAX_SAMPLED) {
        let shape = of(value, depth + 1, budget);
        merged = Some(match merged {
            None => shape,
            Some(so_far) => merge(so_far, shape),
        });
        if *budget == 0 {
            break;
        }
    }
    merged
}

fn merge(a: Shape, b: Shape) -> Shape {
    match (a, b) {
        (Shape::Unknown, _) | (_, Shape::Unknown) => Shape::Unknown,
        (a, b) if a.kind() == b.kind() && a.kind() != 7 => same_kind(a, b),
        (a, b) => {
            let mut members = members_of(a);
            for shape in members_of(b) {
                match members.iter().position(|m| m.kind() == shape.kind()) {
                    Some(at) => {
                        let existing = std::mem::replace(&mut members[at], Shape::Unknown);
                        members[at] = same_kind(existing, shape);
                    }
                    None => members.push(shape),
                }
            }
            if members.len() > MAX_UNION || members.contains(&Shape::Unknown) {
                return Shape::Unknown;
            }
            members.sort_by_key(Shape::kind);
            match members.len() {
                1 => members.remove(0),
                _ => Shape::Union { members },
            }
        }
    }
}

fn members_of(shape: Shape) -> Vec<Shape> {
    match shape {
        Shape::Union { members } => members,
        other => vec![other],
    }
}

/// Two shapes of the same kind (not unions) as one.
fn same_kind(a: Shape, b: Shape) -> Shape {
    match (a, b) {
        (Shape::Array { items: x }, Shape::Array { items: y }) => Shape::Array {
            items: match (x, y) {
                (Some(x), Some(y)) => Some(Box::new(merge(*x, *y))),
                (x, y) => x.or(y),
            },
        },
        (Shape::Object { fields: ours }, Shape::Object { fields: mut theirs }) => {
            let mut fields = BTreeMap::new();
            for (key, mine) in ours {
                let field = match theirs.remove(&key) {
                    Some(other) => Field {
                        shape: merge(mine.shape, other.shape),
                        optional: mine.optional || other.optional,
                    },
                    None => Field {
                        shape: mine.shape,
                        optional: true,
                    },
                };
                fields.insert(key, field);
            }
            for (key, other) in theirs {
                let field = Field {
                    shape: other.shape,
                    optional: true,
                };
                fields.insert(key, field);
            }
            if fields.len() > MAX_FIELDS {
                return to_map(Shape::Object { fields });
            }
            Shape::Object { fields }
        }
        (a @ (Shape::Object { .. } | Shape::Map { .. }), b) => match (to_map(a), to_map(b)) {
            (Shape::Map { values: x }, Shape::Map { values: y }) => Shape::Map {
                values: Box::new(merge(*x, *y)),
            },
            _ => Shape::Unknown,
        },
        (a, _) => a,
    }
}

/// An object as a map: its fields' shapes merged, its keys dropped.
fn to_map(shape: Shape) -> Shape {
    match shape {
        Shape::Object { fields } => {
            let values = fields
                .into_values()
                .map(|field| field.shape)
                .reduce(merge)
                .unwrap_or(Shape::Unknown);
            Shape::Map {
                values: Box::new(values),
            }
        }
        other => other,
    }
}
