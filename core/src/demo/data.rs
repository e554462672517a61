//! The demo server's fixed data: issues, weather, badges.

use serde_json::{Value, json};

const PASSING_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGPQW+AMAAIRARK0QUTlAAAAAElFTkSuQmCC";
const FAILING_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGM4rWIIAALeASGtkHN9AAAAAElFTkSuQmCC";

/// A 1×1 PNG, green or red, base64.
pub(super) fn badge_png(passing: bool) -> &'static str {
    if passing { PASSING_PNG } else { FAILING_PNG }
}

/// One issue.
pub(super) struct Issue {
    id: u64,
    title: String,
    body: String,
    open: bool,
    labels: Vec<String>,
    author: (&'static str, Option<&'static str>),
    assignee: Option<String>,
    comments: Vec<String>,
}

impl Issue {
    fn summary(&self) -> Value {
        json!({
            "id": self.id,
            "title": self.title,
            "state": if self.open { "open" } else { "closed" },
            "labels": self.labels,
            "author": {"login": self.author.0, "name": self.author.1},
            "comments": self.comments.len(),
        })
    }

    pub(super) fn detail(&self) -> Value {
        let mut detail = self.summary();
        detail["body"] = json!(self.body);
        detail["assignee"] = json!(self.assignee);
        detail["comments"] = json!(self.comments);
        detail
    }
}

/// The demo's issue tracker: a fixed seed, changed only by this process's calls.
pub(super) struct Tracker {
    issues: Vec<Issue>,
}

/// Title, body, open, labels, author login, author name, comment count.
type Seed = (
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static str,
    Option<&'static str>,
    u64,
);

const SEED: &[Seed] = &[
    (
        "Crash when the config file is empty",
        "Starting with an empty runbyte.toml panics.",
        true,
        &["bug", "config"],
        "ada",
        Some("Ada L."),
        3,
    ),
    (
        "Support for SSE downstream servers",
        "Legacy HTTP+SSE servers should work.",
        false,
        &["enhancement", "transport"],
        "grace",
        Some("Grace H."),
        5,
    ),
    (
        "Timeouts are not reported clearly",
        "A slow tool gives a vague error.",
        true,
        &["bug", "ux"],
        "linus",
        None,
        1,
    ),
    (
        "Add JSDoc dialect",
        "Some models prefer plain JavaScript.",
        false,
        &["enhancement", "codegen"],
        "ada",
        Some("Ada L."),
        0,
    ),
    (
        "Memory limit is ignored on macOS",
        "Reported by a user; needs a reproduction.",
        true,
        &["bug", "sandbox"],
        "ken",
        None,
        7,
    ),
    (
        "Document the plugin ABI",
        "Write the 'Write a plugin' section.",
        true,
        &["docs"],
        "grace",
        Some("Grace H."),
        2,
    ),
    (
        "search_tools ranks descriptions too low",
        "Names dominate; parameters should count.",
        true,
        &["enhancement", "ux"],
        "barbara",
        Some("Barbara L."),
        4,
    ),
    (
        "Port conflict message is confusing",
        "EADDRINUSE should name the port.",
        false,
        &["bug", "ux"],
        "linus",
        None,
        2,
    ),
];

impl Tracker {
    pub(super) fn seeded() -> Self {
        let issues = SEED
            .iter()
            .zip(1u64..)
            .map(
                |(&(title, body, open, labels, login, name, comments), id)| Issue {
                    id,
                    title: title.to_owned(),
                    body: body.to_owned(),
                    open,
                    labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                    author: (login, name),
                    assignee: None,
                    comments: (1..=comments)
                        .map(|n| format!("Comment {n} on issue {id}."))
                        .collect(),
                },
            )
            .collect();
        Tracker { issues }
    }

    pub(super) fn search(
        &self,
        query: &str,
        state: &str,
        labels: &[String],
        limit: usize,
    ) -> Value {
        let query = query.to_lowercase();
        let matched: Vec<&Issue> = self
            .issues
            .iter()
            .filter(|issue| match state {
                "open" => issue.open,
                "closed" => !issue.open,
                _ => true,
            })
            .filter(|issue| labels.iter().all(|label| issue.labels.contains(label)))
            .filter(|issue| {
                query.split_whitespace().all(|word| {
                    issue.title.to_lowercase().contains(word)
                        || issue.body.to_lowercase().contains(word)
                })
            })
            .collect();
        json!({
            "total": matched.len(),
            "issues": matched.iter().take(limit.clamp(1, 100)).map(|issue| issue.summary()).collect::<Vec<_>>(),
        })
    }

    pub(super) fn get(&self, id: u64) -> Option<&Issue> {
        self.issues.iter().find(|issue| issue.id == id)
    }

    pub(super) fn create(
        &mut self,
        title: &str,
        body: &str,
        labels: Vec<String>,
        assignee: Option<&str>,
    ) -> &Issue {
        let id = self.issues.len() as u64 + 1;
        self.issues.push(Issue {
            id,
            title: title.to_owned(),
            body: body.to_owned(),
            open: true,
            labels,
            author: ("demo", Some("Demo User")),
            assignee: assignee.map(str::to_owned),
            comments: Vec::new(),
        });
        &self.issues[self.issues.len() - 1]
    }

    pub(super) fn close(&mut self, id: u64, comment: Option<&str>) -> Option<&Issue> {
        let issue = self.issues.iter_mut().find(|issue| issue.id == id)?;
        issue.open = false;
        if let Some(comment) = comment {
            issue.comments.push(comment.to_owned());
        }
        Some(issue)
    }
}

const WEATHER: &[(&str, &str, f64, u32, &str)] = &[
    ("Berlin", "DE", 7.5, 81, "overcast"),
    ("London", "GB", 9.0, 88, "light rain"),
    ("New York", "US", 4.0, 60, "clear"),
    ("Paris", "FR", 8.5, 76, "cloudy"),
    ("Sydney", "AU", 24.0, 55, "sunny"),
    ("Tokyo", "JP", 12.0, 65, "clear"),
];

/// The table's weather for `city` (case-insensitive), in `units`.
pub(super) fn weather(city: &str, units: &str) -> Option<Value> {
    let &(name, country, celsius, humidity, conditions) = WEATHER
        .iter()
        .find(|(name, ..)| name.eq_ignore_ascii_case(city))?;
    let (temperature, unit) = if units == "imperial" {
        (celsius * 9.0 / 5.0 + 32.0, "F")
    } else {
        (celsius, "C")
    };
    Some(json!({
        "city": name,
        "country": country,
        "temperature": temperature,
        "unit": unit,
        "humidity": humidity,
        "conditions": conditions,
    }))
}
