//! JSON Schema to a small type language that both dialects render.
//!
//! The conversion is total where it can be: whatever a schema says that has no type-level
//! meaning (`not`, `if`, string formats) is left to the doc comments, and a malformed part
//! becomes `unknown` with a note. It gives up on a whole schema only when it cannot know what a
//! part means: a `$ref` that leaves the document or points at nothing, or a schema too large to
//! be worth a type. Every local `$ref` becomes a named type, which makes recursion and shared
//! parts cost nothing.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::{
    doc::doc,
    names,
    text::string_literal,
    types::{
        Doc, Index, MAX_LITERALS, Object, Prop, Role, Tuple, Ty, TypeRef, intersection, union,
    },
};

/// Schemas nested deeper than this are typed `unknown`.
pub const MAX_DEPTH: usize = 32;
/// A schema with more nodes than this is not converted at all.
pub const MAX_NODES: usize = 100_000;

/// A `$ref` target turned into a named type.
#[derive(Debug, Clone)]
pub struct Def {
    /// The JSON pointer it was reached by (decoded), e.g. `/$defs/Issue`.
    pub pointer: String,
    /// The name it asks for: the PascalCase of the pointer's last part.
    pub base: String,
    /// Its type.
    pub ty: Ty,
    /// Its schema's doc.
    pub doc: Doc,
}

/// One schema converted.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The schema this is.
    pub role: Role,
    /// The root's type.
    pub ty: Ty,
    /// The root's doc (its `title` and `description`).
    pub doc: Doc,
    /// The named `$ref` targets, in the order they were found.
    pub defs: Vec<Def>,
    /// Parts that were typed `unknown`, for the warnings (deduplicated, sorted).
    pub notes: Vec<String>,
}

/// Why a schema could not be converted.
#[derive(Debug, Clone, PartialEq)]
pub struct Unconvertible(pub String);

/// Converts one of a tool's schemas.
pub fn convert(role: Role, root: &Value) -> Result<Converted, Unconvertible> {
    if !matches!(root, Value::Object(_) | Value::Bool(_)) {
        return Err(Unconvertible(format!(
            "the schema is {}, not a JSON Schema",
            kind_of(root)
        )));
    }
    let mut cx = Cx {
        role,
        root,
        root_id: root.get("$id").and_then(Value::as_str),
        defs: Vec::new(),
        by_pointer: BTreeMap::new(),
        notes: Vec::new(),
        nodes: 0,
    };
    let ty = cx.ty(root, 0)?;
    let mut done = 0;
    let mut defs = Vec::new();
    while done < cx.defs.len() {
        let pointer = cx.defs[done].clone();
        let target = resolve(root, &pointer)
            .ok_or_else(|| Unconvertible(format!("$ref target {pointer:?} vanished")))?;
        let ty = cx.ty(target, 0)?;
        defs.push(Def {
            base: def_base(&pointer),
            ty,
            doc: doc(target),
            pointer,
        });
        done += 1;
    }
    let mut converted = Converted {
        role,
        ty,
        doc: doc(root),
        defs,
        notes: cx.notes,
    };
    converted.notes.sort();
    converted.notes.dedup();
    break_alias_cycles(&mut converted);
    Ok(converted)
}

struct Cx<'a> {
    role: Role,
    root: &'a Value,
    root_id: Option<&'a str>,
    /// Pointers of named targets, by index.
    defs: Vec<String>,
    by_pointer: BTreeMap<String, usize>,
    notes: Vec<String>,
    nodes: usize,
}

impl<'a> Cx<'a> {
    fn ty(&mut self, schema: &'a Value, depth: usize) -> Result<Ty, Unconvertible> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Unconvertible(format!(
                "the schema has more than {MAX_NODES} subschemas"
            )));
        }
        let map = match schema {
            Value::Bool(true) => return Ok(Ty::Unknown),
            Value::Bool(false) => return Ok(Ty::Never),
            Value::Object(map) => map,
            other => {
                self.note(format!(
                    "a subschema is {}; typed `unknown`",
                    kind_of(other)
                ));
                return Ok(Ty::Unknown);
            }
        };
        if depth >= MAX_DEPTH {
            self.note(format!(
                "nested deeper than {MAX_DEPTH} levels; the rest is typed `unknown`"
            ));
            return Ok(Ty::Unknown);
        }
        let mut parts = Vec::new();
        if let Some(reference) = map.get("$ref") {
            match reference.as_str() {
                Some(reference) => parts.push(Ty::Ref(self.reference(reference)?)),
                None => self.note("a `$ref` is not a string; ignored".to_owned()),
            }
        } else if let Some(value) = map.get("const") {
            parts.push(Ty::Literal(value.clone()));
        } else if let Some(values) = map.get("enum") {
            match values {
                Value::Array(values) if values.len() > MAX_LITERALS => {
                    // The doc comment lists the first values (see `doc`).
                    parts.push(union(values.iter().map(kind_type).collect()));
                }
                Value::Array(values) => parts.push(union(
                    values.iter().map(|v| Ty::Literal(v.clone())).collect(),
                )),
                _ => self.note("an `enum` is not an array; ignored".to_owned()),
            }
        } else {
            parts.push(self.base(map, depth)?);
        }
        if let Some(all) = map.get("allOf") {
            for member in self.members(all, "allOf", depth)? {
                parts.push(member);
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(any) = map.get(keyword) {
                let members = self.members(any, keyword, depth)?;
                parts.push(union(members));
            }
        }
        let mut ty = intersection(parts);
        if map.get("nullable") == Some(&Value::Bool(true)) {
            ty = union(vec![ty, Ty::Null]);
        }
        Ok(ty)
    }

    fn members(
        &mut self,
        list: &'a Value,
        keyword: &str,
        depth: usize,
    ) -> Result<Vec<Ty>, Unconvertible> {
        let Value::Array(list) = list else {
            self.note(format!("an `{keyword}` is not an array; ignored"));
            return Ok(vec![Ty::Unknown]);
        };
        list.iter()
            .map(|member| self.ty(member, depth + 1))
            .collect()
    }

    /// The type from `type` and the object and array keywords.
    fn base(&mut self, map: &'a Map<String, Value>, depth: usize) -> Result<Ty, Unconvertible> {
        let names: Vec<&str> = match map.get("type") {
            Some(Value::String(name)) => vec![name.as_str()],
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            Some(_) => {
                self.note("a `type` is neither a string nor an array; ignored".to_owned());
                Vec::new()
            }
            None if [
                "properties",
                "additionalProperties",
                "patternProperties",
                "required",
            ]
            .iter()
            .any(|k| map.contains_key(*k)) =>
            {
                vec!["object"]
            }
            None if ["items", "prefixItems"]
                .iter()
                .any(|k| map.contains_key(*k)) =>
            {
                vec!["array"]
            }
            None => return Ok(Ty::Unknown),
        };
        if names.is_empty() && matches!(map.get("type"), Some(Value::Array(_))) {
            return Ok(Ty::Never);
        }
        let mut members = Vec::with_capacity(names.len());
        for name in names {
            members.push(match name {
                "string" => Ty::String,
                "number" | "integer" => Ty::Number,
                "boolean" => Ty::Boolean,
                "null" => Ty::Null,
                "object" => self.object(map, depth)?,
                "array" => self.array(map, depth)?,
                other => {
                    self.note(format!(
                        "unknown type name {}; typed `unknown`",
                        string_literal(other)
                    ));
                    Ty::Unknown
                }
            });
        }
        Ok(if members.is_empty() {
            Ty::Unknown
        } else {
            union(members)
        })
    }

    fn object(&mut self, map: &'a Map<String, Value>, depth: usize) -> Result<Ty, Unconvertible> {
        let properties = match map.get("properties") {
            Some(Value::Object(properties)) => Some(properties),
            Some(_) => {
                self.note("`properties` is not an object; ignored".to_owned());
                None
            }
            None => None,
        };
        let mut required: Vec<&str> = Vec::new();
        if let Some(Value::Array(list)) = map.get("required") {
            for key in list.iter().filter_map(Value::as_str) {
                if !required.contains(&key) {
                    required.push(key);
                }
            }
        }
        let mut props = Vec::new();
        for key in &required {
            let (ty, doc) = match properties.and_then(|p| p.get(*key)) {
                Some(schema) => (self.ty(schema, depth + 1)?, doc(schema)),
                None => (Ty::Unknown, Doc::default()),
            };
            props.push(Prop {
                key: (*key).to_owned(),
                optional: false,
                ty,
                doc,
            });
        }
        if let Some(properties) = properties {
            let mut rest: Vec<(&String, &Value)> = properties
                .iter()
                .filter(|(key, _)| !required.contains(&key.as_str()))
                .collect();
            rest.sort_by(|a, b| a.0.cmp(b.0));
            for (key, schema) in rest {
                let ty = self.ty(schema, depth + 1)?;
                props.push(Prop {
                    key: key.clone(),
                    optional: true,
                    ty,
                    doc: doc(schema),
                });
            }
        }
        let mut others = Vec::new();
        match map.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(schema) => others.push(self.ty(schema, depth + 1)?),
        }
        let mut patterns = Vec::new();
        if let Some(Value::Object(by_pattern)) = map.get("patternProperties") {
            let mut entries: Vec<_> = by_pattern.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (pattern, schema) in entries {
                patterns.push(pattern.clone());
                others.push(self.ty(schema, depth + 1)?);
            }
        }
        let index = if others.is_empty() {
            None
        } else {
            let declared = union(others);
            let mut widened = vec![declared.clone()];
            if declared != Ty::Unknown {
                widened.extend(props.iter().map(|p| p.ty.clone()));
                if props.iter().any(|p| p.optional) {
                    widened.push(Ty::Undefined);
                }
            }
            Some(Index {
                ty: Box::new(union(widened)),
                declared: Box::new(declared),
                patterns,
            })
        };
        Ok(Ty::Object(Object { props, index }))
    }

    fn array(&mut self, map: &'a Map<String, Value>, depth: usize) -> Result<Ty, Unconvertible> {
        // 2020-12 `prefixItems` + `items`, or draft-07 array-form `items` + `additionalItems`.
        let (prefix, rest) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (_, Some(Value::Array(prefix))) => (Some(prefix), map.get("additionalItems")),
            (_, items) => (None, items),
        };
        let Some(prefix) = prefix else {
            let item = match rest {
                Some(schema) => self.ty(schema, depth + 1)?,
                None => Ty::Unknown,
            };
            return Ok(Ty::Array(Box::new(item)));
        };
        let items = prefix
            .iter()
            .map(|item| self.ty(item, depth + 1))
            .collect::<Result<Vec<_>, _>>()?;
        let required = map
            .get("minItems")
            .and_then(Value::as_u64)
            .map_or(items.len(), |min| {
                usize::try_from(min).unwrap_or(usize::MAX).min(items.len())
            });
        let rest = match rest {
            None | Some(Value::Bool(false)) => None,
            Some(schema) => Some(Box::new(self.ty(schema, depth + 1)?)),
        };
        Ok(Ty::Tuple(Tuple {
            items,
            required,
            rest,
        }))
    }

    fn reference(&mut self, reference: &str) -> Result<TypeRef, Unconvertible> {
        let fragment = match reference.split_once('#') {
            Some(("", fragment)) => fragment,
            Some((base, fragment)) if Some(base) == self.root_id => fragment,
            None if Some(reference) == self.root_id => "",
            _ => {
                return Err(Unconvertible(format!(
                    "$ref {} points outside the schema",
                    string_literal(reference)
                )));
            }
        };
        let pointer = percent_decode(fragment);
        if pointer.is_empty() {
            return Ok(TypeRef {
                role: self.role,
                def: None,
            });
        }
        if !pointer.starts_with('/') {
            return Err(Unconvertible(format!(
                "$ref {} names an anchor, which is not supported",
                string_literal(reference)
            )));
        }
        if let Some(&index) = self.by_pointer.get(&pointer) {
            return Ok(TypeRef {
                role: self.role,
                def: Some(index),
            });
        }
        if resolve(self.root, &pointer).is_none() {
            return Err(Unconvertible(format!(
                "$ref {} points at nothing",
                string_literal(reference)
            )));
        }
        let index = self.defs.len();
        self.defs.push(pointer.clone());
        self.by_pointer.insert(pointer, index);
        Ok(TypeRef {
            role: self.role,
            def: Some(index),
        })
    }

    fn note(&mut self, note: String) {
        if self.notes.len() < 16 && !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }
}

/// The type of all values of `value`'s kind.
fn kind_type(value: &Value) -> Ty {
    match value {
        Value::Null => Ty::Null,
        Value::Bool(_) => Ty::Boolean,
        Value::Number(_) => Ty::Number,
        Value::String(_) => Ty::String,
        Value::Array(_) => Ty::Array(Box::new(Ty::Unknown)),
        Value::Object(_) => Ty::Object(Object {
            props: Vec::new(),
            index: Some(Index {
                ty: Box::new(Ty::Unknown),
                declared: Box::new(Ty::Unknown),
                patterns: Vec::new(),
            }),
        }),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Follows a decoded JSON pointer (`/a/b`, with `~0` and `~1`).
fn resolve<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    root.pointer(pointer)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// The name a `$ref` target asks for: its pointer's last part, unescaped, in PascalCase.
fn def_base(pointer: &str) -> String {
    let last = pointer.rsplit('/').next().unwrap_or_default();
    names::pascal(&last.replace("~1", "/").replace("~0", "~"))
}

/// Makes a named type that is only another name for itself (`type A = B; type B = A`, or
/// `type A = A | null`) `unknown`: such a type means nothing and TypeScript rejects it.
fn break_alias_cycles(converted: &mut Converted) {
    let count = converted.defs.len() + 1;
    let slot = |r: &TypeRef| r.def.map_or(0, |d| d + 1);
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut collect = |from: usize, ty: &Ty, role: Role| {
        let mut stack = vec![ty];
        while let Some(ty) = stack.pop() {
            match ty {
                Ty::Union(members) | Ty::Intersection(members) => stack.extend(members),
                Ty::Ref(r) if r.role == role => edges[from].push(slot(r)),
                _ => {}
            }
        }
    };
    if converted.defs.is_empty()
        && !matches!(
            converted.ty,
            Ty::Ref(_) | Ty::Union(_) | Ty::Intersection(_)
        )
    {
        return;
    }
    let role = converted.role;
    collect(0, &converted.ty, role);
    for (i, def) in converted.defs.iter().enumerate() {
        collect(i + 1, &def.ty, role);
    }
    let mut cyclic = vec![false; count];
    for start in 0..count {
        // Is `start` reachable from itself along unguarded edges?
        let mut seen = vec![false; count];
        let mut stack = edges[start].clone();
        while let Some(node) = stack.pop() {
            if node == start {
                cyclic[start] = true;
                break;
            }
            if !std::mem::replace(&mut seen[node], true) {
                stack.extend(edges[node].iter().copied());
            }
        }
    }
    if cyclic[0] {
        converted.ty = Ty::Unknown;
    }
    for (i, def) in converted.defs.iter_mut().enumerate() {
        if cyclic[i + 1] {
            def.ty = Ty::Unknown;
        }
    }
}
