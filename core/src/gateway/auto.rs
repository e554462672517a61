//! `expose = "auto"`: which servers' tools are listed directly beside code mode. Each listing
//! weighs the ready `auto` servers' definitions as `tools/list` carries them (JSON bytes / 4,
//! an estimate of tokens on the safe side: the token bench measures 4.1–4.6 bytes a token on
//! real servers) and lists them directly, smallest first, while their sum fits
//! `[server] direct-budget`. Every `auto` server stays in the VFS either way, so programs can
//! still compose it; only what the client sees in `tools/list` changes, and a catalogue that
//! grows past the budget leaves it (clients are told, `tools/list_changed`).
//!
//! When every enabled server is `auto` or `direct`, every `auto` one is ready, and the `auto`
//! servers' definitions together fit the direct budget plus what Runbyte's own surface weighs
//! (its tools and instructions, [`crate::own_tools::surface_tokens`]), clients see those tools
//! **alone**: Runbyte's own tools leave `tools/list` and its instructions the handshake. Listed
//! beside code mode, a catalogue of D tokens costs 2·(D + surface) over a lookup's two turns;
//! alone, 2·D, the same as the server listed directly. The surface is the most it saves a turn,
//! so the budget grows by it (the token bench: 5 and 10 generated tools cost no more than the
//! server alone, a 9-tool real server of 2,360 tokens stays in code mode).

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
};

/// What `auto` decided for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    pub server: String,
    /// The estimated tokens of its tools' definitions.
    pub tokens: u64,
    /// Whether its tools are listed directly too.
    pub direct: bool,
    /// When clients see the direct tools alone (see the module), the budget that held them.
    pub alone: Option<u64>,
}

impl AutoChoice {
    /// Why, in words, for `runbyte tools` and `check`.
    pub fn reason(&self, budget: u64) -> String {
        if let Some(alone) = self.alone {
            format!(
                "auto: to programs, and to clients directly without Runbyte's own tools (its \
                 definitions are about {} tokens; every server is auto or direct, and the auto \
                 servers' fit together within {alone}: the direct budget of {budget} plus what \
                 Runbyte's own tools and instructions weigh)",
                self.tokens
            )
        } else if self.direct {
            format!(
                "auto: to programs, and to clients directly (its definitions, about {} tokens, \
                 fit the direct budget of {budget})",
                self.tokens
            )
        } else if self.tokens > budget {
            format!(
                "auto: to programs only (its definitions, about {} tokens, are more than the \
                 direct budget of {budget}: code mode costs less)",
                self.tokens
            )
        } else {
            format!(
                "auto: to programs only (its definitions, about {} tokens, do not fit what the \
                 smaller auto servers leave of the direct budget of {budget})",
                self.tokens
            )
        }
    }
}

/// The estimated tokens of `tools`' definitions: their JSON's bytes / 4, rounded up.
pub fn estimated_tokens(tools: &[rmcp::model::Tool]) -> u64 {
    let bytes: usize = tools
        .iter()
        .map(|tool| serde_json::to_vec(tool).map_or(0, |json| json.len()))
        .sum();
    (bytes as u64).div_ceil(4)
}

/// Each server's last weighed catalogue, so that a listing or a direct call weighs only a
/// catalogue that changed.
#[derive(Default)]
pub struct Weighed(Mutex<HashMap<String, (Catalogue, u64)>>);

/// A server's tools as the Hub's view holds them.
type Catalogue = Arc<Vec<rmcp::model::Tool>>;

impl Weighed {
    /// The estimated tokens of `server`'s `tools`.
    pub fn weigh(&self, server: &str, tools: &Catalogue) -> u64 {
        let mut weighed = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, tokens)) = weighed.get(server)
            && Arc::ptr_eq(seen, tools)
        {
            return *tokens;
        }
        let tokens = estimated_tokens(tools);
        weighed.insert(server.to_owned(), (tools.clone(), tokens));
        tokens
    }
}

/// Of `candidates` (each server with its estimated tokens), those listed directly: the
/// smallest first (ties by name), while their sum stays within `budget`. With `alone` (the
/// budget when nothing but direct tools could be listed, see the module), every candidate
/// when all fit it together.
pub fn choose(candidates: &[(String, u64)], budget: u64, alone: Option<u64>) -> Vec<AutoChoice> {
    let sum = candidates
        .iter()
        .try_fold(0u64, |sum, (_, tokens)| sum.checked_add(*tokens));
    if let (Some(alone), Some(sum)) = (alone.filter(|_| budget > 0), sum)
        && sum <= alone
        && !candidates.is_empty()
    {
        return candidates
            .iter()
            .map(|(server, tokens)| AutoChoice {
                server: server.clone(),
                tokens: *tokens,
                direct: true,
                alone: Some(alone),
            })
            .collect();
    }
    let mut sorted: Vec<&(String, u64)> = candidates.iter().collect();
    sorted.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let mut spent = 0u64;
    let mut direct = BTreeSet::new();
    for (server, tokens) in sorted {
        match spent.checked_add(*tokens) {
            Some(total) if total <= budget => {
                spent = total;
                direct.insert(server.as_str());
            }
            _ => break,
        }
    }
    candidates
        .iter()
        .map(|(server, tokens)| AutoChoice {
            server: server.clone(),
            tokens: *tokens,
            direct: direct.contains(server.as_str()),
            alone: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn direct(candidates: &[(&str, u64)], budget: u64) -> Vec<String> {
        let owned: Vec<(String, u64)> = candidates
            .iter()
            .map(|(server, tokens)| (server.to_string(), *tokens))
            .collect();
        choose(&owned, budget, None)
            .into_iter()
            .filter(|choice| choice.direct)
            .map(|choice| choice.server)
            .collect()
    }

    #[test]
    fn the_smallest_catalogues_are_listed_while_they_fit_together() {
        let candidates = [("big", 2800), ("fetch", 260), ("time", 120), ("tiny", 30)];
        assert_eq!(direct(&candidates, 410), ["fetch", "time", "tiny"]);
        assert_eq!(direct(&candidates, 400), ["time", "tiny"]);
        assert_eq!(direct(&candidates, 100), ["tiny"]);
        assert_eq!(
            direct(&candidates, 10_000),
            ["big", "fetch", "time", "tiny"]
        );
        assert!(direct(&candidates, 0).is_empty());
        // Ties go by name, so every listing decides the same.
        assert_eq!(direct(&[("b", 200), ("a", 200)], 300), ["a"]);
        // A sum that would overflow fits nothing.
        assert_eq!(direct(&[("a", u64::MAX), ("b", 1)], u64::MAX), ["b"]);
    }

    #[test]
    fn the_reason_says_whether_it_fits_alone() {
        let choices = choose(
            &[
                ("a".to_owned(), 300),
                ("b".to_owned(), 200),
                ("c".to_owned(), 900),
            ],
            400,
            None,
        );
        let reason = |server: &str| {
            choices
                .iter()
                .find(|choice| choice.server == server)
                .unwrap()
                .reason(400)
        };
        assert!(
            reason("b").contains("to clients directly"),
            "{}",
            reason("b")
        );
        assert!(
            reason("a").contains("what the smaller auto servers leave"),
            "{}",
            reason("a")
        );
        assert!(
            reason("c").contains("more than the direct budget of 400"),
            "{}",
            reason("c")
        );
    }

    #[test]
    fn catalogues_that_fit_with_the_surface_are_listed_alone() {
        let owned = |candidates: &[(&str, u64)]| -> Vec<(String, u64)> {
            candidates
                .iter()
                .map(|(server, tokens)| (server.to_string(), *tokens))
                .collect()
        };
        // 700 tokens do not fit the direct budget of 400, but do with a surface of 500.
        let choices = choose(&owned(&[("a", 300), ("b", 400)]), 400, Some(900));
        assert!(choices.iter().all(|c| c.direct && c.alone == Some(900)));
        let why = choices[0].reason(400);
        assert!(
            why.contains("without Runbyte's own tools") && why.contains("within 900"),
            "{why}"
        );
        // One more token and it is the budget alone again: the smallest that fit beside code.
        let choices = choose(&owned(&[("a", 300), ("b", 601)]), 400, Some(900));
        assert!(choices.iter().all(|c| c.alone.is_none()));
        assert_eq!(
            choices.iter().filter(|c| c.direct).count(),
            1,
            "{choices:?}"
        );
        // A direct budget of 0 lists nothing directly, alone or not; nothing to list is not
        // alone; an overflowing sum fits nothing alone.
        assert!(
            choose(&owned(&[("a", 1)]), 0, Some(500))
                .iter()
                .all(|c| !c.direct)
        );
        assert!(choose(&[], 400, Some(900)).is_empty());
        let choices = choose(&owned(&[("a", u64::MAX), ("b", 1)]), 400, Some(u64::MAX));
        assert!(choices.iter().all(|c| c.alone.is_none()));
    }

    #[test]
    fn a_definition_weighs_its_json_bytes_over_four() {
        let tool: rmcp::model::Tool = serde_json::from_value(serde_json::json!({
            "name": "echo",
            "description": "Echoes.",
            "inputSchema": {"type": "object"}
        }))
        .unwrap();
        let bytes = serde_json::to_vec(&tool).unwrap().len() as u64;
        assert_eq!(
            estimated_tokens(std::slice::from_ref(&tool)),
            bytes.div_ceil(4)
        );
        assert_eq!(
            estimated_tokens(&[tool.clone(), tool.clone()]),
            (2 * bytes).div_ceil(4)
        );
        assert_eq!(estimated_tokens(&[]), 0);

        // A catalogue is weighed again only when the server's view holds a new one.
        let weighed = Weighed::default();
        let one = Arc::new(vec![tool.clone()]);
        assert_eq!(weighed.weigh("s", &one), bytes.div_ceil(4));
        assert_eq!(weighed.weigh("s", &one), bytes.div_ceil(4));
        let two = Arc::new(vec![tool.clone(), tool]);
        assert_eq!(weighed.weigh("s", &two), (2 * bytes).div_ceil(4));
    }
}
