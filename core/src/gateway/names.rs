//! The one rule for the names clients see of the servers' things (directly exposed tools,
//! prompts): `<prefix><name>`, the prefix being the server's `direct-prefix` (else
//! `<server>_`). A name that is one of Runbyte's own, or that two things would take (`a_` +
//! `b_report` and `a_b_` + `report`), is given to none of them; a tool whose own name is outside
//! MCP's tool-name characters is not exposed. Each thing left out is told once, with a WARN
//! naming its server and its name.

use std::collections::{HashMap, HashSet};

/// Runbyte's own tools: no directly exposed tool may take one of their names.
pub use crate::own_tools::NAMES as OWN_TOOLS;

/// The longest tool name MCP allows.
const MAX_TOOL_NAME: usize = 128;

/// The most distinct warnings remembered (so each is said once); past it, no more are said.
const MAX_WARNED: usize = 4096;

/// Whether `name` is a tool name as MCP defines them: 1 to 128 characters of A-Z, a-z, 0-9,
/// `_`, `-` and `.` (so no invisible, look-alike or control character).
pub fn is_spec_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// One thing of a server, as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The name clients see and call it by.
    pub exposed: String,
    /// Its server.
    pub server: String,
    /// Its name on the server.
    pub item: String,
}

/// What [`name_all`] made of a list of things: those that got their names, in the order given,
/// and why each of the others did not (by the name it would have had).
#[derive(Debug, Default)]
pub struct Naming {
    pub named: Vec<Named>,
    pub left_out: HashMap<String, String>,
}

impl Naming {
    /// The server and item a name clients use stands for: `Ok` for a name given out, `Err` with
    /// the reason for one left out, `None` for a name never listed.
    pub fn target(&self, name: &str) -> Option<Result<(String, String), String>> {
        if let Some(named) = self.named.iter().find(|named| named.exposed == name) {
            return Some(Ok((named.server.clone(), named.item.clone())));
        }
        self.left_out.get(name).map(|why| Err(why.clone()))
    }
}

/// Names `things` (server, prefix, item) by the rule above; `what` is `tool` or `prompt`,
/// `reserved` the names no thing may take, and `spec_names` whether an item's name must be an
/// MCP tool name. The reasons are also returned, for the caller to log once each.
pub fn name_all(
    things: Vec<(String, String, String)>,
    what: &str,
    reserved: &[&str],
    spec_names: bool,
) -> (Naming, Vec<String>) {
    let mut naming = Naming::default();
    let mut warnings = Vec::new();
    let mut takers: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut candidates = Vec::new();
    for (server, prefix, item) in things {
        let exposed = format!("{prefix}{item}");
        if spec_names && !is_spec_tool_name(&item) {
            let why = format!(
                "server `{server}`'s {what} {item:?} is not exposed: its name is not an MCP \
                 {what} name (1 to {MAX_TOOL_NAME} characters of A-Z a-z 0-9 _ - .), so it could \
                 pass for another"
            );
            warnings.push(why.clone());
            naming.left_out.insert(exposed, why);
            continue;
        }
        if reserved.contains(&exposed.as_str()) {
            let why = format!(
                "server `{server}`'s {what} `{}` is not exposed: its name `{exposed}` is one of \
                 Runbyte's own tools",
                item.escape_debug()
            );
            warnings.push(why.clone());
            naming.left_out.insert(exposed, why);
            continue;
        }
        takers
            .entry(exposed.clone())
            .or_default()
            .push((server.clone(), item.clone()));
        candidates.push(Named {
            exposed,
            server,
            item,
        });
    }
    for (exposed, taken_by) in &takers {
        if taken_by.len() < 2 {
            continue;
        }
        let who: Vec<String> = taken_by
            .iter()
            .map(|(server, item)| format!("server `{server}`'s {what} `{}`", item.escape_debug()))
            .collect();
        let why = format!(
            "{} would all be named `{}`; none of them is exposed under it (give one server \
             another `direct-prefix`)",
            who.join(" and "),
            exposed.escape_debug()
        );
        warnings.push(why.clone());
        naming.left_out.insert(exposed.clone(), why);
    }
    naming.named = candidates
        .into_iter()
        .filter(|named| !naming.left_out.contains_key(&named.exposed))
        .collect();
    warnings.sort();
    warnings.dedup();
    (naming, warnings)
}

/// The server and item a name clients use stands for, by the one rule for tools and prompts:
/// the thing `naming` lists under it; for a name left out, why (`Err`); for a name never
/// listed, the server with the longest prefix it starts with (whose answer then says why it
/// cannot be used); `None` when no prefix fits.
pub fn resolve(
    naming: &Naming,
    prefixes: &[(String, String)],
    name: &str,
) -> Option<Result<(String, String), String>> {
    naming
        .target(name)
        .or_else(|| longest_prefix(prefixes, name).map(Ok))
}

/// The server a name not listed is sent to: the one with the longest prefix the name starts
/// with and that leaves something after it.
fn longest_prefix(prefixes: &[(String, String)], name: &str) -> Option<(String, String)> {
    prefixes
        .iter()
        .filter_map(|(server, prefix)| {
            let rest = name.strip_prefix(prefix.as_str())?;
            (!rest.is_empty()).then(|| (prefix.len(), server.clone(), rest.to_owned()))
        })
        .max_by_key(|(length, ..)| *length)
        .map(|(_, server, rest)| (server, rest))
}

/// Warnings said once each.
#[derive(Default)]
pub struct Warned(std::sync::Mutex<HashSet<String>>);

impl Warned {
    /// Logs each warning not said before.
    pub fn warn(&self, warnings: &[String]) {
        let Ok(mut said) = self.0.lock() else { return };
        for warning in warnings {
            if said.len() < MAX_WARNED && said.insert(warning.clone()) {
                tracing::warn!("{warning}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thing(server: &str, prefix: &str, item: &str) -> (String, String, String) {
        (server.to_owned(), prefix.to_owned(), item.to_owned())
    }

    #[test]
    fn names_that_collide_or_take_runbytes_are_given_to_none() {
        let (naming, warnings) = name_all(
            vec![
                thing("execute", "execute_", "code"),
                thing("a", "a_", "b_report"),
                thing("a_b", "a_b_", "report"),
                thing("a", "a_", "fine"),
                thing("z", "z_", "delete\u{200b}_thing"),
                thing("z", "z_", "delete_thing"),
            ],
            "tool",
            &OWN_TOOLS,
            true,
        );
        let exposed: Vec<&str> = naming.named.iter().map(|n| n.exposed.as_str()).collect();
        assert_eq!(exposed, ["a_fine", "z_delete_thing"]);
        assert_eq!(warnings.len(), 3, "{warnings:#?}");
        assert!(
            matches!(naming.target("execute_code"), Some(Err(why)) if why.contains("`execute`"))
        );
        assert!(
            matches!(naming.target("a_b_report"), Some(Err(why)) if why.contains("`a`") && why.contains("`a_b`"))
        );
        assert!(
            matches!(naming.target("z_delete\u{200b}_thing"), Some(Err(why)) if why.contains("\\u{200b}"))
        );
        assert_eq!(
            naming.target("z_delete_thing"),
            Some(Ok(("z".to_owned(), "delete_thing".to_owned())))
        );
        assert_eq!(naming.target("nothing"), None);
    }

    #[test]
    fn spec_tool_names() {
        for good in ["a", "get-user", "list.items", "A_9", &"x".repeat(128)] {
            assert!(is_spec_tool_name(good), "{good}");
        }
        for bad in [
            "",
            "with space",
            "ünïcode",
            "delete\u{200b}_thing",
            &"x".repeat(129),
        ] {
            assert!(!is_spec_tool_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_unlisted_name_goes_to_the_longest_prefix() {
        let prefixes = vec![
            ("a".to_owned(), "a_".to_owned()),
            ("a_b".to_owned(), "a_b_".to_owned()),
        ];
        assert_eq!(
            longest_prefix(&prefixes, "a_b_x"),
            Some(("a_b".to_owned(), "x".to_owned()))
        );
        assert_eq!(
            longest_prefix(&prefixes, "a_x"),
            Some(("a".to_owned(), "x".to_owned()))
        );
        assert_eq!(longest_prefix(&prefixes, "a_"), None);
    }

    /// Tools and prompts of the same servers, named alike, resolve every name the same way:
    /// one listed, one two would share, one never listed, one no prefix fits.
    #[test]
    fn tools_and_prompts_resolve_a_name_the_same_way() {
        let prefixes = vec![
            ("a".to_owned(), "a_".to_owned()),
            ("a_b".to_owned(), "a_b_".to_owned()),
        ];
        let things = || {
            vec![
                thing("a", "a_", "b_report"),
                thing("a_b", "a_b_", "report"),
                thing("a", "a_", "fine"),
                thing("a_b", "a_b_", "fine"),
            ]
        };
        let (tools, _) = name_all(things(), "tool", &OWN_TOOLS, true);
        let (prompts, _) = name_all(things(), "prompt", &[], false);
        for name in [
            "a_fine",
            "a_b_fine",
            "a_b_report",
            "a_b_unlisted",
            "a_x",
            "zzz",
        ] {
            let tool = resolve(&tools, &prefixes, name);
            let prompt = resolve(&prompts, &prefixes, name);
            assert_eq!(
                tool.as_ref().map(Result::is_ok),
                prompt.as_ref().map(Result::is_ok),
                "{name}"
            );
            if let (Some(Ok(tool)), Some(Ok(prompt))) = (&tool, &prompt) {
                assert_eq!(tool, prompt, "{name}");
            }
        }
        let ok = |server: &str, item: &str| Some(Ok((server.to_owned(), item.to_owned())));
        assert_eq!(resolve(&tools, &prefixes, "a_b_fine"), ok("a_b", "fine"));
        assert_eq!(
            resolve(&prompts, &prefixes, "a_b_unlisted"),
            ok("a_b", "unlisted")
        );
        assert!(matches!(
            resolve(&prompts, &prefixes, "a_b_report"),
            Some(Err(_))
        ));
        assert_eq!(resolve(&tools, &prefixes, "zzz"), None);
    }
}
