//! `tools` and `exclude-tools` of a server's table: which of its tools Runbyte shows. A hidden
//! tool is left out of the list the Hub keeps, so it is absent from the VFS and from search,
//! and a call to it is refused by name; `runbyte tools` lists it with the reason.

use crate::config::ServerConfig;

/// A server's tool filter: globs (`*` any run of characters, `?` one character).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// When set, only tools matching one of these are shown.
    only: Option<Vec<String>>,
    /// Tools matching one of these are hidden (after `only`).
    except: Vec<String>,
}

impl ToolFilter {
    pub fn new(config: &ServerConfig) -> Self {
        ToolFilter {
            only: config.tools.clone(),
            except: config.exclude_tools.clone(),
        }
    }

    /// Why the tool `name` is hidden, or `None` when it is shown.
    pub fn hides(&self, name: &str) -> Option<String> {
        if let Some(only) = &self.only
            && !only.iter().any(|glob| matches(glob, name))
        {
            return Some("it matches none of the server's `tools`".to_owned());
        }
        // A name that only looks like an excluded one (an invisible character in it, another
        // case) is excluded as well: the deny list matches the name as it is shown.
        let shown = skeleton(name);
        self.except
            .iter()
            .find(|glob| matches(glob, name) || matches(&skeleton(glob), &shown))
            .map(|glob| format!("it matches `exclude-tools` entry \"{glob}\""))
    }
}

/// A name as a reader sees it: without the characters that show as nothing (format and
/// control characters, zero-width spaces and joiners, bidi marks, variation selectors, tags),
/// in lower case.
fn skeleton(name: &str) -> String {
    name.chars()
        .filter(|&c| !is_invisible(c))
        .flat_map(char::to_lowercase)
        .collect()
}

fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// Whether `name` matches `glob`, in time proportional to their lengths' product at worst.
pub fn matches(glob: &str, name: &str) -> bool {
    let (glob, name): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    let (mut g, mut n) = (0, 0);
    // Where the last `*` was, and the name position it is retried from.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((at, from)) => {
                    g = at + 1;
                    n = from + 1;
                    star = Some((at, from + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn a_name_that_only_looks_excluded_is_excluded() {
        let filter = super::ToolFilter {
            only: None,
            except: vec!["delete_*".to_owned()],
        };
        for name in [
            "delete_thing",
            "delete\u{200b}_thing",
            "Delete_thing",
            "DELETE_\u{2060}THING",
            "de\u{00ad}lete_thing",
        ] {
            assert!(filter.hides(name).is_some(), "{name:?} is shown");
        }
        assert_eq!(filter.hides("remove_thing"), None);
        assert_eq!(filter.hides("deletes"), None);
    }

    use super::*;

    #[test]
    fn globs_match_as_in_a_shell() {
        for (glob, name, expected) in [
            ("echo", "echo", true),
            ("echo", "echoes", false),
            ("*", "anything", true),
            ("*", "", true),
            ("get_*", "get_issue", true),
            ("get_*", "list_issues", false),
            ("*_issue*", "create_issue_comment", true),
            ("?cho", "echo", true),
            ("?cho", "cho", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(matches(glob, name), expected, "{glob} / {name}");
        }
        // A pathological pattern stays quick.
        let name = "a".repeat(2000);
        assert!(!matches(&format!("{}b", "*a".repeat(50)), &name));
    }

    #[test]
    fn only_then_except() {
        let filter = ToolFilter {
            only: Some(vec!["get_*".to_owned(), "search".to_owned()]),
            except: vec!["get_secret*".to_owned()],
        };
        assert_eq!(filter.hides("get_issue"), None);
        assert_eq!(filter.hides("search"), None);
        assert!(
            filter
                .hides("delete_repo")
                .unwrap()
                .contains("none of the server's `tools`")
        );
        assert!(
            filter
                .hides("get_secret_key")
                .unwrap()
                .contains("\"get_secret*\"")
        );
        assert_eq!(ToolFilter::default().hides("anything"), None);
    }
}
