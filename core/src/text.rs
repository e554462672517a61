//! Small text helpers for messages: the closest name, for "did you mean".

/// Names longer than this are never matched: 256 characters. The search costs the product of
/// two names' lengths, so a hostile name (a program may pass any string) must not reach it.
pub const MAX_MATCHED_CHARS: usize = 256;

/// The candidate closest to `wanted` by edit distance, when it is close enough to be a likely
/// typo (at most a third of the longer name's length, and at most 4 edits). Bounded: names over
/// [`MAX_MATCHED_CHARS`] are skipped, and so is every candidate whose length alone rules it out.
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_chars = wanted.chars().count();
    if wanted_chars > MAX_MATCHED_CHARS {
        return None;
    }
    let wanted_lower = wanted.to_lowercase();
    candidates
        .into_iter()
        .filter_map(|candidate| {
            let chars = candidate.chars().count();
            let allowed = (wanted_chars.max(chars) / 3).clamp(1, 4);
            if chars > MAX_MATCHED_CHARS || chars.abs_diff(wanted_chars) > allowed {
                return None;
            }
            let d = distance(&wanted_lower, &candidate.to_lowercase());
            (d <= allowed).then_some((d, candidate))
        })
        .min_by_key(|(d, candidate)| (*d, *candidate))
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over chars.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name_and_nonsense_finds_nothing() {
        let names = ["search_issues", "get_issue", "create_issue"];
        assert_eq!(closest("serch_issues", names), Some("search_issues"));
        assert_eq!(closest("get_isue", names), Some("get_issue"));
        assert_eq!(closest("weather", names), None);
    }

    #[test]
    fn hostile_names_cost_nothing() {
        let long = "x".repeat(1 << 20);
        let names = ["search_issues", long.as_str()];
        let started = std::time::Instant::now();
        assert_eq!(closest(&long, names), None);
        assert_eq!(closest(&long[..300], names), None);
        assert_eq!(closest("serch_issues", names), Some("search_issues"));
        // Before the bound, one 1 MiB name cost ~280 ms in release; now a length compare.
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
