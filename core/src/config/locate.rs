//! Turning byte spans into lines, columns and dotted keys, for errors that name their place.

use std::{ops::Range, path::Path};

use toml::de::{DeTable, DeValue};

use super::ConfigError;

/// Finds places in one configuration file.
pub(super) struct Locator<'a> {
    text: &'a str,
    file: &'a Path,
}

impl<'a> Locator<'a> {
    pub(super) fn new(text: &'a str, file: &'a Path) -> Self {
        Locator { text, file }
    }

    /// 1-based line and column of a byte offset.
    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..self.text.floor_char_boundary(offset)];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    /// A parse or deserialization error from the toml crate, with its place and key.
    pub(super) fn toml_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span();
        let key = span.clone().and_then(|span| self.key_at(span.start));
        ConfigError {
            file: self.file.to_owned(),
            position: span.map(|span| self.position(span.start)),
            key,
            message: error.message().trim_end().to_owned(),
        }
    }

    pub(super) fn error_at(&self, span: Range<usize>, key: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            position: Some(self.position(span.start)),
            key: Some(key.to_owned()),
            message,
        }
    }

    /// An error about `key` (dotted), placed on the line that defines it when it can be found.
    pub(super) fn error_at_key(&self, key: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            position: self.span_of(key).map(|span| self.position(span.start)),
            key: Some(key.to_owned()),
            message,
        }
    }

    fn span_of(&self, dotted: &str) -> Option<Range<usize>> {
        let root = DeTable::parse(self.text).ok()?;
        let segments = split_key(dotted);
        let mut table = root.get_ref();
        let mut found = None;
        for (i, segment) in segments.iter().enumerate() {
            let (key, value) = table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == segment)?;
            found = Some(key.span());
            if i + 1 < segments.len() {
                match value.get_ref() {
                    DeValue::Table(inner) => table = inner,
                    _ => return found,
                }
            }
        }
        found
    }

    /// The dotted key whose key or value contains `offset`.
    fn key_at(&self, offset: usize) -> Option<String> {
        let root = DeTable::parse(self.text).ok()?;
        let mut path = Vec::new();
        find_key(root.get_ref(), offset, &mut path);
        (!path.is_empty()).then(|| path.join("."))
    }
}

fn find_key(table: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (key, value) in table.iter() {
        let in_key = key.span().contains(&offset);
        let in_value = value.span().contains(&offset);
        let inner_hit = match value.get_ref() {
            DeValue::Table(inner) => {
                path.push(key_segment(key.get_ref()));
                let hit = find_key(inner, offset, path);
                if !hit {
                    path.pop();
                }
                hit
            }
            _ => false,
        };
        if inner_hit {
            return true;
        }
        if in_key || in_value {
            path.push(key_segment(key.get_ref()));
            return true;
        }
    }
    false
}

/// A key as written in a dotted path: bare when it can be, quoted otherwise.
pub(crate) fn key_segment(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

fn split_key(dotted: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = dotted.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            '.' if !quoted => segments.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    segments.push(current);
    segments
}
