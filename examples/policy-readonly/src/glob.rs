//! `*` and `?` globs over `server/tool`.

use std::fmt;

/// One checked pattern.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    text: String,
    chars: Vec<char>,
    wild: bool,
}

impl Pattern {
    /// Checks `text`; the error says what is wrong with it (the caller adds where it is).
    pub(crate) fn parse(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Err("a pattern cannot be empty".to_owned());
        }
        if !text.contains('/') {
            return Err("a pattern matches `server/tool` and must contain a `/`".to_owned());
        }
        if let Some(c) = text
            .chars()
            .find(|c| matches!(c, '[' | ']' | '{' | '}' | '\\'))
        {
            return Err(format!(
                "`{c}` is not supported: only `*` and `?` are wildcards"
            ));
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(format!(
                "a pattern cannot contain the control character {c:?}"
            ));
        }
        Ok(Pattern {
            text: text.to_owned(),
            chars: text.chars().collect(),
            wild: text.contains(['*', '?']),
        })
    }

    /// Whether the pattern has no wildcard and is `target` itself.
    pub(crate) fn is_exactly(&self, target: &str) -> bool {
        !self.wild && self.text == target
    }

    /// Whether the pattern matches all of `target`.
    ///
    /// The classic linear-backtracking matcher: on a mismatch after a `*`, retry with the `*`
    /// taking one more character. At most `pattern × target` steps, never exponential.
    pub(crate) fn matches(&self, target: &str) -> bool {
        let (p, t): (&[char], Vec<char>) = (&self.chars, target.chars().collect());
        let (mut pi, mut ti) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            match p.get(pi) {
                Some('*') => {
                    star = Some((pi, ti));
                    pi += 1;
                }
                Some(&c) if c == '?' || c == t[ti] => {
                    pi += 1;
                    ti += 1;
                }
                _ => match star {
                    Some((star_pi, star_ti)) => {
                        pi = star_pi + 1;
                        ti = star_ti + 1;
                        star = Some((star_pi, star_ti + 1));
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
