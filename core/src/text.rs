//! Small text helpers for messages: the closest name, for "did you mean".

/// The candidate closest to `wanted` by edit distance, when it is close enough to be a likely
/// typo (at most a third of the longer name's length, and at most 4 edits).
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    candidates
        .into_iter()
        .map(|candidate| {
            (
                distance(&wanted_lower, &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|(d, candidate)| {
            let longest = wanted.chars().count().max(candidate.chars().count());
            *d <= (longest / 3).clamp(1, 4)
        })
        .min_by_key(|(d, candidate)| (*d, *candidate))
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over chars.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
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
}
