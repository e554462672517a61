//! `search_tools`' index: BM25F over a tool's name, parameter names, server and description,
//! built once per snapshot (so once per catalogue change) and queried without touching a tool's
//! text again.
//!
//! Ranking, as before the index: a word in the name counts most, then the parameters, then the
//! server and the description; a word that only shares a prefix with a field's word (`issue` /
//! `issues`) counts half; a tool matching every query word is preferred. BM25 adds what a large
//! catalogue needs: a word most tools share (`record`, a server's name on every one of its tools)
//! counts less than a rare one, and one long description does not outweigh a short exact name.

use std::collections::BTreeMap;

use super::{ToolEntry, words};

/// The fields, in the order of [`WEIGHTS`].
const FIELDS: usize = 4;
/// How much a match in each field counts: name, parameters, server, description.
const WEIGHTS: [f32; FIELDS] = [4.0, 1.5, 1.0, 1.0];
/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation, per field: a name or server is short by nature, a description
/// is normalised by its length.
const B: [f32; FIELDS] = [0.3, 0.3, 0.0, 0.75];
/// What a prefix match counts against a whole word.
const PARTIAL: f32 = 0.5;
/// The shortest word matched by prefix.
const MIN_PREFIX: usize = 3;

/// Words too common to say anything about a tool.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "by", "for", "from", "i", "in", "is", "it", "me", "my",
    "of", "on", "or", "the", "to", "with",
];

/// One term's occurrences in one tool, per field.
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

/// The index of one snapshot's tools and skills, in [`super::Snapshot::tools`]'s order.
#[derive(Debug, Default)]
pub struct SearchIndex {
    /// Every term, with the tools holding it.
    terms: BTreeMap<Box<str>, Vec<Posting>>,
    /// Each tool's field lengths, in words.
    lengths: Vec<[u16; FIELDS]>,
    /// The mean field lengths.
    mean: [f32; FIELDS],
}

impl SearchIndex {
    /// The index of `tools`.
    pub fn build<'a>(tools: impl Iterator<Item = &'a ToolEntry>) -> SearchIndex {
        let mut terms: BTreeMap<Box<str>, Vec<Posting>> = BTreeMap::new();
        let mut lengths = Vec::new();
        let mut totals = [0f64; FIELDS];
        for (doc, tool) in tools.enumerate() {
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            let fields: [Vec<String>; FIELDS] = [
                words(&tool.name),
                tool.params.iter().flat_map(|p| words(p)).collect(),
                words(&tool.server),
                words(&tool.description),
            ];
            let mut length = [0u16; FIELDS];
            let mut counts: BTreeMap<&str, [u16; FIELDS]> = BTreeMap::new();
            for (field, field_words) in fields.iter().enumerate() {
                length[field] = u16::try_from(field_words.len()).unwrap_or(u16::MAX);
                totals[field] += f64::from(length[field]);
                for word in field_words {
                    let tf = &mut counts.entry(word.as_str()).or_default()[field];
                    *tf = tf.saturating_add(1);
                }
            }
            for (word, tf) in counts {
                match terms.get_mut(word) {
                    Some(postings) => postings.push(Posting { doc, tf }),
                    None => {
                        terms.insert(word.into(), vec![Posting { doc, tf }]);
                    }
                }
            }
            lengths.push(length);
        }
        let count = lengths.len().max(1) as f64;
        let mean = totals.map(|total| ((total / count) as f32).max(1.0));
        SearchIndex {
            terms,
            lengths,
            mean,
        }
    }

    /// The tools best matching `query` as (position in the indexed order, score), best first,
    /// ties in indexed order; at most `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, u32)> {
        let all = words(query);
        let mut query: Vec<String> = all
            .iter()
            .filter(|w| !STOPWORDS.contains(&w.as_str()))
            .cloned()
            .collect();
        if query.is_empty() {
            query = all;
        }
        query.sort_unstable();
        query.dedup();
        if query.is_empty() || self.lengths.is_empty() {
            return Vec::new();
        }
        let docs = self.lengths.len();
        let mut scores = vec![0f32; docs];
        // How many query words each tool matches, for preferring tools that match them all.
        let mut matched = vec![0u16; docs];
        let mut seen = vec![u32::MAX; docs];
        for (at, word) in query.iter().enumerate() {
            let at = u32::try_from(at).unwrap_or(u32::MAX);
            for (postings, weight) in self.expand(word) {
                let idf = self.idf(postings.len());
                for posting in postings {
                    let doc = posting.doc as usize;
                    scores[doc] += weight * idf * self.saturated(posting);
                    if seen[doc] != at {
                        seen[doc] = at;
                        matched[doc] += 1;
                    }
                }
            }
        }
        let words = query.len() as f32;
        let mut hits: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, score)| *score > 0.0)
            .map(|(doc, score)| {
                let coverage = f32::from(matched[doc]) / words;
                (doc, score * (1.0 + coverage * coverage))
            })
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(limit);
        hits.into_iter()
            .map(|(doc, score)| (doc, (score * 100.0).round().max(1.0) as u32))
            .collect()
    }

    /// The postings `word` reaches, with what each counts: the word itself, the words it is a
    /// prefix of, and the words that are a prefix of it.
    fn expand<'s>(&'s self, word: &str) -> Vec<(&'s [Posting], f32)> {
        let mut out = Vec::new();
        if let Some(postings) = self.terms.get(word) {
            out.push((postings.as_slice(), 1.0));
        }
        if word.len() < MIN_PREFIX {
            return out;
        }
        let longer = self
            .terms
            .range::<str, _>((std::ops::Bound::Excluded(word), std::ops::Bound::Unbounded))
            .take_while(|(term, _)| term.starts_with(word));
        for (_, postings) in longer {
            out.push((postings.as_slice(), PARTIAL));
        }
        for end in MIN_PREFIX..word.len() {
            if let Some(prefix) = word.get(..end)
                && let Some(postings) = self.terms.get(prefix)
            {
                out.push((postings.as_slice(), PARTIAL));
            }
        }
        out
    }

    fn idf(&self, holding: usize) -> f32 {
        let docs = self.lengths.len() as f32;
        let holding = holding as f32;
        (1.0 + (docs - holding + 0.5) / (holding + 0.5)).ln()
    }

    /// BM25F: the fields' weighted, length-normalised frequencies, saturated once.
    fn saturated(&self, posting: &Posting) -> f32 {
        let length = &self.lengths[posting.doc as usize];
        let mut tf = 0.0;
        for field in 0..FIELDS {
            if posting.tf[field] == 0 {
                continue;
            }
            let norm = 1.0 - B[field] + B[field] * f32::from(length[field]) / self.mean[field];
            tf += WEIGHTS[field] * f32::from(posting.tf[field]) / norm;
        }
        tf / (K1 + tf)
    }
}

#[cfg(test)]
mod tests;
