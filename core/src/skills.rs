//! Saved skills: programs that worked, kept under a name as plain files, importable by later
//! programs from `/skills/<name>.ts`.
//!
//! A skill is a folder in the skills folder (`[server] skills-dir`, default
//! `$XDG_DATA_HOME/runbyte/skills`): `SKILL.md` (the Agent Skills format: YAML frontmatter with
//! `name` and `description`, then how to use it), `skill.ts` (the program, whose default export
//! is a function of one argument) and, when the skill takes typed arguments, `args.json` (their
//! JSON Schema). People may read and edit them; a folder that cannot be read is skipped with a
//! warning naming it. Saving replaces a skill only when asked to, and writes a new folder beside
//! the old one before renaming it into place, so a reader never sees half a skill.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::Value;

use crate::vfs::{File, ToolEntry};

/// The VFS folder of skills.
pub const ROOT: &str = crate::vfs::SKILLS;

/// The most skills read from the folder; the rest are left out with a warning.
const MAX_SKILLS: usize = 1000;
/// The largest program a skill may hold.
const MAX_CODE_BYTES: usize = 256 * 1024;
/// The largest `args.json` or `SKILL.md`.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The longest description (the Agent Skills limit).
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// How deep an argument schema is rendered as a type before `unknown`.
const TYPE_DEPTH: usize = 4;

/// One saved skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// Its name: lowercase letters, digits and single hyphens, at most 64 characters.
    pub name: String,
    /// What it does (one paragraph).
    pub description: String,
    /// The program; its default export is a function taking the arguments.
    pub code: String,
    /// The JSON Schema of its arguments, if it declared them.
    pub args: Option<Value>,
}

/// What a client asks to save.
#[derive(Debug, Clone)]
pub struct SaveRequest {
    pub skill: Skill,
    /// Replace a skill of the same name (otherwise that is refused).
    pub overwrite: bool,
}

/// The skills folder.
#[derive(Debug, Clone)]
pub struct Skills {
    dir: PathBuf,
}

/// The user's skills folder: `$XDG_DATA_HOME/runbyte/skills`, else
/// `~/.local/share/runbyte/skills`, else `.runbyte/skills` in the working folder.
fn default_dir() -> PathBuf {
    crate::dirs::user_folder(crate::dirs::Base::Data, "skills")
        .unwrap_or_else(|| PathBuf::from(".runbyte/skills"))
}

impl Skills {
    /// The skills folder a configuration names (or the default).
    pub fn new(dir: Option<&Path>) -> Self {
        Skills {
            dir: dir.map(Path::to_owned).unwrap_or_else(default_dir),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every readable skill, sorted by name; one that cannot be read is skipped with a warning.
    pub fn list(&self) -> Vec<Skill> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| valid_name(name).is_ok())
            .collect();
        names.sort();
        if names.len() > MAX_SKILLS {
            tracing::warn!(
                dir = %self.dir.display(),
                "holds {} skills; only the first {MAX_SKILLS} are served",
                names.len()
            );
            names.truncate(MAX_SKILLS);
        }
        names
            .into_iter()
            .filter_map(|name| match self.read(&name) {
                Ok(skill) => Some(skill),
                Err(error) => {
                    tracing::warn!("skill `{name}` is skipped: {error}");
                    None
                }
            })
            .collect()
    }

    /// One skill, by name.
    pub fn read(&self, name: &str) -> Result<Skill, String> {
        valid_name(name)?;
        let folder = self.dir.join(name);
        let manifest = read_bounded(&folder.join("SKILL.md"))?;
        let (frontmatter_name, description) = frontmatter(&manifest).ok_or_else(|| {
            format!(
                "{}: no frontmatter with `name` and `description`",
                folder.join("SKILL.md").display()
            )
        })?;
        if frontmatter_name != name {
            return Err(format!(
                "{}: its name is `{frontmatter_name}`, not its folder's `{name}`",
                folder.join("SKILL.md").display()
            ));
        }
        let code = read_bounded(&folder.join("skill.ts"))?;
        let args_path = folder.join("args.json");
        let args = if args_path.exists() {
            let text = read_bounded(&args_path)?;
            Some(
                serde_json::from_str(&text)
                    .map_err(|e| format!("{}: not JSON: {e}", args_path.display()))?,
            )
        } else {
            None
        };
        Ok(Skill {
            name: name.to_owned(),
            description,
            code,
            args,
        })
    }

    /// Checks and saves a skill; the message says what was written.
    pub fn save(&self, request: SaveRequest) -> Result<String, String> {
        let skill = &request.skill;
        check(skill)?;
        let folder = self.dir.join(&skill.name);
        let exists = folder.exists();
        if exists && !request.overwrite {
            return Err(format!(
                "skill `{}` exists ({}); pass `overwrite: true` to replace it",
                skill.name,
                folder.display()
            ));
        }
        if !exists && self.list().len() >= MAX_SKILLS {
            return Err(format!(
                "the skills folder holds {MAX_SKILLS} skills already; delete one first"
            ));
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let nonce = nonce();
        let fresh = self.dir.join(format!(".{}.new-{nonce}", skill.name));
        let written = (|| -> std::io::Result<()> {
            std::fs::create_dir(&fresh)?;
            std::fs::write(fresh.join("SKILL.md"), manifest(skill))?;
            std::fs::write(fresh.join("skill.ts"), &skill.code)?;
            if let Some(args) = &skill.args {
                let text = serde_json::to_string_pretty(args).unwrap_or_default();
                std::fs::write(fresh.join("args.json"), text + "\n")?;
            }
            if exists {
                let old = self.dir.join(format!(".{}.old-{nonce}", skill.name));
                std::fs::rename(&folder, &old)?;
                std::fs::rename(&fresh, &folder)?;
                let _ = std::fs::remove_dir_all(&old);
            } else {
                std::fs::rename(&fresh, &folder)?;
            }
            Ok(())
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(format!(
                "cannot save skill `{}` in {}: {error}",
                skill.name,
                self.dir.display()
            ));
        }
        Ok(format!(
            "{} skill `{}` in {}; import it with: import {} from './skills/{}';",
            if exists { "Replaced" } else { "Saved" },
            skill.name,
            folder.display(),
            identifier(&skill.name),
            skill.name
        ))
    }

    /// Deletes a skill.
    pub fn delete(&self, name: &str) -> Result<(), String> {
        valid_name(name)?;
        let folder = self.dir.join(name);
        if !folder.join("SKILL.md").exists() {
            return Err(format!("no skill `{name}` in {}", self.dir.display()));
        }
        std::fs::remove_dir_all(&folder)
            .map_err(|e| format!("cannot delete {}: {e}", folder.display()))
    }
}

/// The files of a skill folder served as resources (SEP-2640), with their MIME types.
const FILES: [(&str, &str); 3] = [
    ("SKILL.md", "text/markdown"),
    ("skill.ts", "text/x-typescript"),
    ("args.json", "application/json"),
];

/// The scheme of skill resources (SEP-2640): `skill://<name>/SKILL.md`.
pub const SKILL_SCHEME: &str = "skill://";

impl Skills {
    /// The skills as the MCP skills extension (SEP-2640) lists them: each `SKILL.md`'s URI,
    /// its frontmatter, and a manifest of its files with their SHA-256 digests.
    pub fn mcp_skills(&self) -> Vec<rmcp::model::Skill> {
        self.list()
            .iter()
            .filter_map(|skill| self.mcp_skill(&skill.name, &skill.description))
            .collect()
    }

    /// One skill's SEP-2640 entry, by the URI of its `SKILL.md`.
    pub fn mcp_skill_at(&self, uri: &str) -> Option<rmcp::model::Skill> {
        let name = uri.strip_prefix(SKILL_SCHEME)?.strip_suffix("/SKILL.md")?;
        let skill = self.read(name).ok()?;
        self.mcp_skill(&skill.name, &skill.description)
    }

    fn mcp_skill(&self, name: &str, description: &str) -> Option<rmcp::model::Skill> {
        let folder = self.dir.join(name);
        let mut files = Vec::new();
        for (file, _) in FILES {
            let Ok(bytes) = std::fs::read(folder.join(file)) else {
                continue;
            };
            let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
            let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
            files.push(rmcp::model::SkillResource::new(
                format!("{SKILL_SCHEME}{name}/{file}"),
                format!("sha256:{hex}"),
                bytes.len() as u64,
            ));
        }
        let skill = rmcp::model::Skill::new(
            format!("{SKILL_SCHEME}{name}/SKILL.md"),
            rmcp::model::SkillFrontmatter::new(name, description),
            rmcp::model::SkillResources::Files(files),
        );
        skill.validate().ok().map(|()| skill)
    }

    /// The skills' files as resources (`skill://<name>/<file>`).
    pub fn resources(&self) -> Vec<rmcp::model::Resource> {
        let mut out = Vec::new();
        for skill in self.list() {
            for (file, mime) in FILES {
                if self.dir.join(&skill.name).join(file).exists() {
                    // A SKILL.md is named by its skill (SEP-2640); the other files by path.
                    let name = if file == "SKILL.md" {
                        skill.name.clone()
                    } else {
                        format!("{}/{file}", skill.name)
                    };
                    let mut resource = rmcp::model::Resource::new(
                        format!("{SKILL_SCHEME}{}/{file}", skill.name),
                        name,
                    )
                    .with_mime_type(mime);
                    if file == "SKILL.md" {
                        resource = resource.with_description(skill.description.clone());
                    }
                    out.push(resource);
                }
            }
        }
        out
    }

    /// A skill file's text and MIME type, by its `skill://` URI; `None` for a URI that names no
    /// skill file (only the files a skill holds are served, never another path).
    pub fn read_resource(&self, uri: &str) -> Option<(String, &'static str)> {
        let (name, file) = uri.strip_prefix(SKILL_SCHEME)?.split_once('/')?;
        valid_name(name).ok()?;
        let (file, mime) = FILES.iter().find(|(known, _)| *known == file)?;
        let text = read_bounded(&self.dir.join(name).join(file)).ok()?;
        Some((text, mime))
    }
}

/// Reads a file of a skill, refusing one larger than [`MAX_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "{}: {size} bytes, more than {MAX_FILE_BYTES}",
            path.display()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn nonce() -> String {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A skill name: 1 to 64 lowercase letters, digits and hyphens, no hyphen first, last or twice
/// in a row (the Agent Skills rule, which also keeps it a safe folder and module name).
pub fn valid_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a skill name: use 1 to 64 lowercase letters, digits and single \
             hyphens (e.g. `weekly-report`)"
        ))
    }
}

/// Everything a skill must be before it is saved.
fn check(skill: &Skill) -> Result<(), String> {
    valid_name(&skill.name)?;
    let description = skill.description.trim();
    if description.is_empty() || description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "the description must say what the skill does, in 1 to {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    if skill.code.len() > MAX_CODE_BYTES {
        return Err(format!(
            "the program is {} bytes; a skill holds at most {MAX_CODE_BYTES}",
            skill.code.len()
        ));
    }
    if !skill.code.contains("export default") {
        return Err(
            "a skill's program must `export default` a function of its arguments, e.g. \
             `export default async function (args: { city: string }) { ... }`"
                .to_owned(),
        );
    }
    crate::sandbox::transpile(&skill.code, &format!("{ROOT}/{}.ts", skill.name))
        .map_err(|error| format!("the program does not compile: {}", error.message))?;
    if let Some(args) = &skill.args {
        let is_object_schema = args.as_object().is_some_and(|schema| {
            schema.get("type").is_none_or(|t| t == "object")
                && schema.get("properties").is_none_or(Value::is_object)
        });
        if !is_object_schema {
            return Err(
                "`args` must be the JSON Schema of one object argument ({\"type\": \"object\", \
                 \"properties\": {...}})"
                    .to_owned(),
            );
        }
        if args.to_string().len() > 64 * 1024 {
            return Err("`args` is larger than 64 KiB".to_owned());
        }
    }
    Ok(())
}

/// The `name` and `description` of a SKILL.md's frontmatter (plain or JSON-quoted scalars).
fn frontmatter(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix("---")?;
    let (block, _) = rest.split_once("\n---")?;
    let mut name = None;
    let mut description = None;
    for line in block.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let value = if value.starts_with('"') {
            serde_json::from_str::<String>(value).ok()?
        } else {
            value.to_owned()
        };
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            _ => {}
        }
    }
    Some((name?, description?))
}

/// A skill's SKILL.md: frontmatter, then how a program uses it.
fn manifest(skill: &Skill) -> String {
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    format!(
        "---\nname: {}\ndescription: {}\n---\n\n# {}\n\n{}\n\nA Runbyte skill: a program saved with `save_skill`. Import it in a program:\n\n```ts\nimport {} from './skills/{}';\n\nexport default await {}({});\n```\n\n{}\n\nThe program is `skill.ts`{}.\n",
        skill.name,
        quoted(skill.description.trim()),
        skill.name,
        skill.description.trim(),
        identifier(&skill.name),
        skill.name,
        identifier(&skill.name),
        if skill.args.is_some() { "{ ... }" } else { "" },
        signature(skill),
        if skill.args.is_some() {
            "; `args.json` is the JSON Schema of its arguments"
        } else {
            ""
        },
    )
}

/// The name a program imports a skill under: `weekly-report` → `weeklyReport`.
pub fn identifier(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The skill's signature: `function weeklyReport(args: { city: string }): Promise<unknown>`.
pub fn signature(skill: &Skill) -> String {
    let args = match &skill.args {
        Some(schema) => format!("args: {}", ts_type(schema, 0)),
        None => String::new(),
    };
    format!(
        "function {}({args}): Promise<unknown>",
        identifier(&skill.name)
    )
}

/// A TypeScript type for a JSON Schema, for the signature (never for checking).
fn ts_type(schema: &Value, depth: usize) -> String {
    if depth > TYPE_DEPTH {
        return "unknown".to_owned();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let literals: Vec<String> = values.iter().take(20).map(Value::to_string).collect();
        if !literals.is_empty() {
            return literals.join(" | ");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "string".to_owned(),
        Some("number" | "integer") => "number".to_owned(),
        Some("boolean") => "boolean".to_owned(),
        Some("null") => "null".to_owned(),
        Some("array") => {
            let item = schema
                .get("items")
                .map(|items| ts_type(items, depth + 1))
                .unwrap_or_else(|| "unknown".to_owned());
            format!("Array<{item}>")
        }
        Some("object") | None if schema.get("properties").is_some() => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = String::from("{ ");
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, property) in properties.iter().take(50) {
                    let key_text = if is_identifier(key) {
                        key.clone()
                    } else {
                        serde_json::to_string(key).unwrap_or_default()
                    };
                    let optional = if required.contains(&key.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    let _ = write!(
                        out,
                        "{key_text}{optional}: {}; ",
                        ts_type(property, depth + 1)
                    );
                }
            }
            out.push('}');
            out
        }
        Some("object") => "Record<string, unknown>".to_owned(),
        _ => "unknown".to_owned(),
    }
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Text safe inside a `/** */` comment.
fn block_comment_safe(text: &str) -> String {
    text.replace("*/", "* /")
        .chars()
        .map(|c| {
            if matches!(c, '\u{2028}' | '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// The skills as the VFS serves them: `/skills/<name>.ts` (a header saying what the skill is and
/// how to import it, then the program) and an entry each for listing and search.
pub fn vfs_files(skills: &[Skill]) -> (Vec<(String, Arc<File>)>, Vec<ToolEntry>) {
    let mut files = Vec::new();
    let mut entries = Vec::new();
    for skill in skills {
        let path = format!("{ROOT}/{}.ts", skill.name);
        let signature = signature(skill);
        let mut header = String::from("/**\n");
        for line in block_comment_safe(skill.description.trim()).lines() {
            let _ = writeln!(header, " * {line}");
        }
        let _ = writeln!(
            header,
            " *\n * Saved skill `{}`: export default {signature}\n * Import: import {} from './skills/{}';\n */",
            skill.name,
            identifier(&skill.name),
            skill.name
        );
        files.push((path.clone(), File::new(format!("{header}{}", skill.code))));
        let params = skill
            .args
            .as_ref()
            .and_then(|args| args.get("properties"))
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        entries.push(ToolEntry {
            server: "skills".to_owned(),
            name: skill.name.clone(),
            identifier: identifier(&skill.name),
            path,
            signature,
            summary: skill
                .description
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
            description: skill.description.to_lowercase(),
            params,
        });
    }
    (files, entries)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn skill(name: &str) -> Skill {
        Skill {
            name: name.to_owned(),
            description: "Sums two numbers. */ not the end".to_owned(),
            code: "export default async function (args: { a: number; b: number }) {\n  return args.a + args.b;\n}\n".to_owned(),
            args: Some(json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "the label": {"type": "string"}}, "required": ["a", "b"]})),
        }
    }

    fn temp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("runbyte-skills-{}", nonce()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_skill_is_saved_read_back_replaced_only_when_asked_and_deleted() {
        let dir = temp();
        let skills = Skills::new(Some(&dir));
        let saved = skills
            .save(SaveRequest {
                skill: skill("add-two"),
                overwrite: false,
            })
            .unwrap();
        assert!(
            saved.contains("import addTwo from './skills/add-two'"),
            "{saved}"
        );
        assert_eq!(skills.read("add-two").unwrap(), skill("add-two"));
        let again = skills.save(SaveRequest {
            skill: skill("add-two"),
            overwrite: false,
        });
        assert!(again.unwrap_err().contains("overwrite: true"));
        let mut changed = skill("add-two");
        changed.description = "Adds.".to_owned();
        skills
            .save(SaveRequest {
                skill: changed.clone(),
                overwrite: true,
            })
            .unwrap();
        assert_eq!(skills.list(), vec![changed]);
        // Nothing left behind but the skill.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["add-two"]);
        skills.delete("add-two").unwrap();
        assert!(skills.list().is_empty());
        assert!(skills.delete("add-two").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_skills_are_refused_with_the_reason() {
        let skills = Skills::new(Some(&temp()));
        for (name, says) in [
            ("Add", "not a skill name"),
            ("../x", "not a skill name"),
            ("a--b", "not a skill name"),
            ("-a", "not a skill name"),
        ] {
            let error = skills
                .save(SaveRequest {
                    skill: skill(name),
                    overwrite: false,
                })
                .unwrap_err();
            assert!(error.contains(says), "{name}: {error}");
        }
        let mut no_default = skill("x");
        no_default.code = "const a = 1;".to_owned();
        let mut broken = skill("y");
        broken.code = "export default function (( {".to_owned();
        let mut bad_args = skill("z");
        bad_args.args = Some(json!({"type": "string"}));
        let mut empty = skill("w");
        empty.description = "  ".to_owned();
        for (bad, says) in [
            (no_default, "must `export default`"),
            (broken, "does not compile"),
            (bad_args, "JSON Schema of one object"),
            (empty, "description"),
        ] {
            let error = skills
                .save(SaveRequest {
                    skill: bad,
                    overwrite: false,
                })
                .unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn the_module_says_what_the_skill_is_and_keeps_the_comment_closed() {
        let (files, entries) = vfs_files(&[skill("add-two")]);
        let text = &files[0].1.content;
        assert!(
            text.starts_with("/**\n * Sums two numbers. * / not the end\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "export default function addTwo(args: { a: number; b: number; \"the label\"?: string; }): Promise<unknown>"
            ),
            "{text}"
        );
        assert_eq!(entries[0].path, "/skills/add-two.ts");
        assert_eq!(entries[0].params, vec!["a", "b", "the label"]);
    }
}
