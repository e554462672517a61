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
        self.except
            .iter()
            .find(|glob| matches(glob, name))
            .map(|glob| format!("it matches `exclude-tools` entry \"{glob}\""))
    }
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
