//! `/state`: the module that keeps values (`/state/index.<ext>`, in every snapshot) and, beside
//! it, one entry per value the asking session keeps, by name and size. The values themselves
//! never show here: they are the program's, recalled in the sandbox (see [`crate::kept`]).

use std::{fmt::Write as _, sync::Arc};

use super::{STATE, Snapshot, VfsError, normalize};
use crate::kept::Listed;

/// What the asking session keeps, as `/state` shows it.
pub enum Shelf {
    /// Its values' names and sizes.
    Kept(Vec<Listed>),
    /// It cannot keep values: why.
    Refused(String),
}

/// Whether `path` is `/state` or in it.
pub fn is_state(path: &str) -> bool {
    normalize(path).is_ok_and(|path| path == STATE || path.starts_with("/state/"))
}

impl Snapshot {
    /// The listing of `/state` (the snapshot's files there, then each kept value with its
    /// size), or of a path in it.
    pub fn list_state(
        &self,
        path: &str,
        with_descriptions: bool,
        shelf: &Shelf,
    ) -> Result<String, VfsError> {
        let normalized = normalize(path)?;
        if normalized != STATE {
            if self.files.contains_key(&normalized) || kept_of(&normalized, shelf).is_some() {
                return Err(VfsError::IsFile { path: normalized });
            }
            return Err(self.not_found_in_state(&normalized, shelf));
        }
        let mut out = self.list(STATE, with_descriptions)?;
        match shelf {
            Shelf::Kept(kept) if kept.is_empty() => {
                out.push_str("(nothing kept yet: keep(name, value) from ./state in a program)\n");
            }
            Shelf::Kept(kept) => {
                for value in kept {
                    let _ = writeln!(out, "{}  ({})", value.name, shown_size(value.bytes));
                }
            }
            Shelf::Refused(why) => {
                let _ = writeln!(out, "(this client cannot keep values: {why})");
            }
        }
        Ok(out)
    }

    /// A file in `/state`: the module's text, or what a kept value is (its name and size,
    /// never its value).
    pub fn read_state(&self, path: &str, shelf: &Shelf) -> Result<Arc<str>, VfsError> {
        let normalized = normalize(path)?;
        if self.files.contains_key(&normalized) || normalized == STATE {
            return self.read(&normalized);
        }
        match kept_of(&normalized, shelf) {
            Some(value) => Ok(Arc::from(format!(
                "`{}`: a kept value, {} as JSON, kept {} s ago. Its value stays in the sandbox: \
                 `const value = await recall(\"{}\")` (import {{ recall }} from './state') in a \
                 program reads it.\n",
                value.name,
                shown_size(value.bytes),
                value.age.as_secs(),
                value.name
            ))),
            None => Err(self.not_found_in_state(&normalized, shelf)),
        }
    }

    fn not_found_in_state(&self, path: &str, shelf: &Shelf) -> VfsError {
        let mut names: Vec<String> = self
            .files
            .keys()
            .filter_map(|file| file.strip_prefix("/state/"))
            .map(str::to_owned)
            .collect();
        if let Shelf::Kept(kept) = shelf {
            names.extend(kept.iter().map(|value| value.name.clone()));
        }
        VfsError::NotFound {
            path: path.to_owned(),
            hint: format!("; /state holds: {}", names.join(", ")),
        }
    }
}

/// The kept value `path` names, if the session keeps it.
fn kept_of<'a>(path: &str, shelf: &'a Shelf) -> Option<&'a Listed> {
    let name = path.strip_prefix("/state/")?;
    match shelf {
        Shelf::Kept(kept) => kept.iter().find(|value| value.name == name),
        Shelf::Refused(_) => None,
    }
}

fn shown_size(bytes: usize) -> String {
    format!("{bytes} bytes")
}
