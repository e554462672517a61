#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::{prelude::*, sample::select};
use serde_json::json;

use super::*;

/// A JSON string value of exactly `bytes` bytes as JSON (the quotes included).
fn of_bytes(bytes: usize) -> Value {
    Value::String("x".repeat(bytes - 2))
}

#[test]
fn a_value_is_recalled_by_its_session_only() {
    let kept = Kept::default();
    kept.keep("a", "issues", &json!([{"id": 1}, {"id": 2}]))
        .unwrap();
    assert_eq!(
        kept.recall("a", "issues"),
        Some(json!([{"id": 1}, {"id": 2}]))
    );
    assert_eq!(kept.recall("b", "issues"), None);
    assert_eq!(kept.list("b"), Vec::new());
    assert_eq!(kept.list("a")[0].name, "issues");
    assert_eq!(kept.list("a")[0].bytes, r#"[{"id":1},{"id":2}]"#.len());
    assert!(kept.forget("a", "issues"));
    assert!(!kept.forget("a", "issues"));
    assert_eq!(kept.recall("a", "issues"), None);
    assert_eq!(kept.totals().0, 0);
}

#[test]
fn each_bound_is_refused_naming_it() {
    let kept = Kept::default();
    let over = kept
        .keep("a", "big", &of_bytes(MAX_VALUE_BYTES + 1))
        .unwrap_err();
    assert!(matches!(over, KeepError::ValueTooLarge { .. }));
    assert!(over.to_string().contains("MAX_VALUE_BYTES") && over.to_string().contains("1 MiB"));
    kept.keep("a", "exact", &of_bytes(MAX_VALUE_BYTES)).unwrap();

    for n in 1..(MAX_SESSION_BYTES / MAX_VALUE_BYTES) {
        kept.keep("a", &format!("v{n}"), &of_bytes(MAX_VALUE_BYTES))
            .unwrap();
    }
    let full = kept.keep("a", "one-more", &json!(1)).unwrap_err();
    assert!(full.to_string().contains("MAX_SESSION_BYTES"), "{full}");
    // Replacing a value counts only the difference.
    kept.keep("a", "exact", &of_bytes(MAX_VALUE_BYTES - 10))
        .unwrap();
    kept.keep("a", "small", &of_bytes(10)).unwrap();

    let many = Kept::default();
    for n in 0..MAX_ENTRIES {
        many.keep("a", &format!("n{n}"), &json!(n)).unwrap();
    }
    let refused = many.keep("a", "one-more", &json!(0)).unwrap_err();
    assert!(refused.to_string().contains("MAX_ENTRIES"), "{refused}");
    many.keep("a", "n0", &json!("replaced")).unwrap();

    let sessions = Kept::default();
    for n in 0..MAX_SESSIONS {
        sessions.keep(&format!("s{n}"), "x", &json!(n)).unwrap();
    }
    let refused = sessions.keep("late", "x", &json!(0)).unwrap_err();
    assert!(refused.to_string().contains("MAX_SESSIONS"), "{refused}");
    sessions.end("s0");
    sessions.keep("late", "x", &json!(0)).unwrap();
}

#[test]
fn the_gateway_bound_holds_across_sessions() {
    let kept = Kept::default();
    let per_session = MAX_SESSION_BYTES / MAX_VALUE_BYTES;
    let sessions = MAX_TOTAL_BYTES / MAX_SESSION_BYTES;
    let value = of_bytes(MAX_VALUE_BYTES);
    for s in 0..sessions {
        for n in 0..per_session {
            kept.keep(&format!("s{s}"), &format!("v{n}"), &value)
                .unwrap();
        }
    }
    assert_eq!(kept.totals(), (MAX_TOTAL_BYTES, sessions));
    let refused = kept.keep("other", "v", &json!(1)).unwrap_err();
    assert!(refused.to_string().contains("MAX_TOTAL_BYTES"), "{refused}");
    // A refused keep leaves no shelf behind.
    assert_eq!(kept.totals().1, sessions);
    kept.end("s1");
    kept.keep("other", "v", &json!(1)).unwrap();
}

#[test]
fn names_are_file_names_without_a_dot() {
    for good in ["a", "issues_2026", "top-10", &"n".repeat(MAX_NAME_BYTES)] {
        check_name(good).unwrap();
    }
    for bad in [
        "",
        "index.ts",
        "../x",
        "a/b",
        "é",
        " a",
        &"n".repeat(MAX_NAME_BYTES + 1),
    ] {
        let refused = check_name(bad).unwrap_err();
        assert!(refused.to_string().contains("not a name"), "{refused}");
    }
}

#[test]
fn idle_shelves_expire() {
    let kept = Kept::with_idle(Duration::from_millis(50));
    kept.keep("a", "x", &json!(1)).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(kept.recall("a", "x"), None);
    assert_eq!(kept.totals(), (0, 0));
}

#[test]
fn a_refused_owner_is_told_why() {
    let kept = Kept::default();
    let refused = kept
        .call(
            &Owner::Refused("no identity".into()),
            "keep",
            &json!({"name": "x", "value": 1}),
        )
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "values cannot be kept for this client: no identity"
    );
    let owner = Owner::Session("a".into());
    let missing = kept
        .call(&owner, "keep", &json!({"name": "x"}))
        .unwrap_err();
    assert!(missing.to_string().contains("undefined cannot be kept"));
    kept.call(&owner, "keep", &json!({"name": "x", "value": null}))
        .unwrap();
    assert_eq!(
        kept.call(&owner, "recall", &json!({"name": "x"})).unwrap(),
        json!({"found": true, "value": null})
    );
    assert_eq!(
        kept.call(&owner, "recall", &json!({"name": "y"})).unwrap(),
        json!({"found": false})
    );
    assert_eq!(
        kept.call(&owner, "list", &json!({})).unwrap(),
        json!([{"name": "x", "bytes": 4}])
    );
    assert!(kept.call(&owner, "drop", &json!({})).is_err());
}

#[test]
fn both_module_flavours_name_every_call() {
    for typescript in [true, false] {
        let module = module(typescript);
        for name in ["keep", "recall", "forget", "kept"] {
            assert!(
                module.contains(&format!("export async function {name}")),
                "{module}"
            );
        }
        assert!(module.contains(SERVER) && module.contains("1 MiB"));
        assert_eq!(typescript, module.contains("interface Kept"));
        assert_eq!(!typescript, module.contains("@returns {Promise<Kept>}"));
        assert!(module.contains(&format!("1 to {MAX_NAME_BYTES} letters")));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Keep(&'static str, &'static str, usize),
    Forget(&'static str, &'static str),
    End(&'static str),
}

fn op() -> impl Strategy<Value = Op> {
    let owner = select(vec!["a", "b", "c"]);
    let name = select(vec!["x", "y", "z", "w"]);
    let bytes = select(vec![
        3,
        1000,
        MAX_VALUE_BYTES / 2,
        MAX_VALUE_BYTES - 1,
        MAX_VALUE_BYTES,
        MAX_VALUE_BYTES + 1,
    ]);
    prop_oneof![
        6 => (owner.clone(), name.clone(), bytes).prop_map(|(o, n, b)| Op::Keep(o, n, b)),
        2 => (owner.clone(), name).prop_map(|(o, n)| Op::Forget(o, n)),
        1 => owner.prop_map(Op::End),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Against a plain model: a keep is refused exactly when it would pass a bound, the totals
    /// are the sum of what is held, and a session recalls only its own values.
    #[test]
    fn the_store_matches_its_model(ops in prop::collection::vec(op(), 1..40)) {
        let kept = Kept::default();
        let mut model: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Keep(owner, name, bytes) => {
                    let shelf = model.get(owner).cloned().unwrap_or_default();
                    let held: usize = shelf.values().sum();
                    let after = held - shelf.get(name).copied().unwrap_or(0) + bytes;
                    let fits = bytes <= MAX_VALUE_BYTES && after <= MAX_SESSION_BYTES;
                    let got = kept.keep(owner, name, &of_bytes(bytes));
                    prop_assert_eq!(got.is_ok(), fits, "{:?}", got);
                    if fits {
                        model.entry(owner).or_default().insert(name, bytes);
                    }
                }
                Op::Forget(owner, name) => {
                    let had = model.get_mut(owner).and_then(|s| s.remove(name)).is_some();
                    prop_assert_eq!(kept.forget(owner, name), had);
                }
                Op::End(owner) => {
                    model.remove(owner);
                    kept.end(owner);
                }
            }
            let total: usize = model.values().flat_map(|s| s.values()).sum();
            prop_assert_eq!(kept.totals().0, total);
            for owner in ["a", "b", "c"] {
                let listed: Vec<(String, usize)> =
                    kept.list(owner).into_iter().map(|l| (l.name, l.bytes)).collect();
                let expected: Vec<(String, usize)> = model
                    .get(owner)
                    .map(|s| s.iter().map(|(n, b)| ((*n).to_owned(), *b)).collect())
                    .unwrap_or_default();
                prop_assert_eq!(listed, expected);
            }
        }
    }
}

#[test]
fn the_typescript_module_transpiles() {
    crate::sandbox::transpile(&module(true), "/state/index.ts").unwrap();
}
