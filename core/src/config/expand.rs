//! `${VAR}`, `${VAR:-default}` and `${RUNBYTE_EXE}` in configuration strings.

use toml::de::{DeTable, DeValue};

use super::{
    ConfigError,
    locate::{Locator, key_segment},
};

/// Expands every string value in `table`, in place.
pub(super) fn expand_table(
    table: &mut DeTable<'_>,
    path: &mut Vec<String>,
    locator: &Locator<'_>,
) -> Result<(), ConfigError> {
    for (key, value) in table.iter_mut() {
        path.push(key_segment(key.get_ref()));
        let span = value.span();
        expand_value(value.get_mut(), span, path, locator)?;
        path.pop();
    }
    Ok(())
}

fn expand_value(
    value: &mut DeValue<'_>,
    span: std::ops::Range<usize>,
    path: &mut Vec<String>,
    locator: &Locator<'_>,
) -> Result<(), ConfigError> {
    match value {
        DeValue::String(text) if text.contains('$') => {
            let expanded = expand(text, &|name| lookup(name))
                .map_err(|message| locator.error_at(span, &path.join("."), message))?;
            *text = expanded.into();
        }
        DeValue::Table(table) => expand_table(table, path, locator)?,
        DeValue::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(format!("[{i}]"));
                let span = item.span();
                expand_value(item.get_mut(), span, path, locator)?;
                path.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// The value of a variable: the environment, except `RUNBYTE_EXE`, which is the running binary
/// unless the environment sets it.
fn lookup(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) => Some(value),
        Err(_) if name == "RUNBYTE_EXE" => std::env::current_exe()
            .ok()
            .map(|path| path.display().to_string()),
        Err(_) => None,
    }
}

/// Expands `${NAME}` and `${NAME:-default}`; `$${` stands for a literal `${`. A `$` not followed
/// by `{` is kept as it is.
pub(crate) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            out.push_str("${");
            rest = literal;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = body.find('}') else {
            return Err(format!("`${{` without a closing `}}` in \"{text}\""));
        };
        let inner = &body[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(format!(
                "`${{{inner}}}` is not a variable reference (use ${{NAME}} or ${{NAME:-default}})"
            ));
        }
        match (
            lookup(name).filter(|v| !(v.is_empty() && default.is_some())),
            default,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "environment variable `{name}` is not set (write ${{{name}:-default}} to give a default)"
                ));
            }
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
