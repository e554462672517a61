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
    sync::{Arc, Mutex, RwLock},
};

use runbyte_codegen_common::{
    render::{self, DeclNames, Style},
    schema,
    types::{Role, Ty},
};
use serde_json::Value;

use crate::{
    text::{comment_line, js_lines},
    vfs::{File, ToolEntry},
};

/// The VFS folder of skills.
pub const ROOT: &str = crate::vfs::SKILLS;

/// The most skills the folder holds: a save past it is refused, and a folder filled by hand
/// past it serves the first ones by name (the rest are left out with a warning).
pub const MAX_SKILLS: usize = 256;
/// The most bytes the skills' files (`SKILL.md`, `skill.ts`, `args.json`) take together: 64 MiB.
/// A save past it is refused naming the budget; a folder filled by hand past it serves the
/// skills that fit, by name, and leaves out the rest with a warning.
pub const MAX_FOLDER_BYTES: u64 = 64 * 1024 * 1024;
/// The largest program a skill may hold.
const MAX_CODE_BYTES: usize = 256 * 1024;
/// The largest file of a skill read from the folder (one edited by hand may be larger than a
/// save allows; past this it is skipped).
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The largest `args` schema, as JSON.
const MAX_ARGS_BYTES: usize = 64 * 1024;
/// The longest rendered argument type; past it the signature says `Record<string, unknown>`.
const MAX_SIGNATURE_BYTES: usize = 8 * 1024;
/// The longest description (the Agent Skills limit).
const MAX_DESCRIPTION_CHARS: usize = 1024;

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

/// One file of a saved skill as held in memory: its size and digest, never its text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileMeta {
    file: &'static str,
    mime: &'static str,
    size: u64,
    sha256: String,
}

/// What is held in memory of one saved skill: its name, description, signature and the
/// digests of its files. Its program is read from disk when a program imports it or a client
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMeta {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// `function weeklyReport(args: { city: string }): Promise<unknown>`.
    pub signature: String,
    /// Its arguments' top-level names, for search.
    pub params: Vec<String>,
    /// The comment that heads `/skills/<name>.ts`.
    header: Arc<str>,
    files: Vec<FileMeta>,
    /// The module paths its program names (see [`crate::vfs::named_modules`]).
    names: String,
    /// Each file's inode, size and change time when it was read: a refresh reads again only
    /// the skills whose files changed (a save writes a new folder, so new inodes).
    stamp: Vec<(u64, u64, i64, i64)>,
}

impl SkillMeta {
    /// The bytes its files take.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The skills folder, and what was last read of it.
#[derive(Debug, Clone)]
pub struct Skills {
    dir: PathBuf,
    index: Arc<RwLock<Arc<Vec<SkillMeta>>>>,
}

/// Saves one at a time, so that two saves at once cannot both pass the folder's budget.
static SAVING: Mutex<()> = Mutex::new(());

/// The user's skills folder: `$XDG_DATA_HOME/runbyte/skills`, else
/// `~/.local/share/runbyte/skills`, else `.runbyte/skills` in the working folder.
fn default_dir() -> PathBuf {
    crate::dirs::user_folder(crate::dirs::Base::Data, "skills")
        .unwrap_or_else(|| PathBuf::from(".runbyte/skills"))
}

impl Skills {
    /// The skills folder a configuration names (or the default). Nothing is read until
    /// [`Skills::refresh`].
    pub fn new(dir: Option<&Path>) -> Self {
        Skills {
            dir: dir.map(Path::to_owned).unwrap_or_else(default_dir),
            index: Arc::default(),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the last [`Skills::refresh`] read: no file is read.
    pub fn index(&self) -> Arc<Vec<SkillMeta>> {
        self.index.read().map(|i| i.clone()).unwrap_or_default()
    }

    /// The skill folders' names, sorted (valid names only).
    fn names(&self) -> Vec<String> {
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
        names
    }

    /// Reads the folder again (a blocking read of every skill, once): every readable skill
    /// within [`MAX_SKILLS`] and [`MAX_FOLDER_BYTES`], sorted by name, is kept in memory as its
    /// [`SkillMeta`]; one that cannot be read, or does not fit, is skipped with a warning
    /// naming it.
    pub fn refresh(&self) -> Arc<Vec<SkillMeta>> {
        let names = self.names();
        let before = self.index();
        let mut metas = Vec::new();
        let mut bytes = 0u64;
        for name in names {
            if metas.len() >= MAX_SKILLS {
                tracing::warn!(
                    dir = %self.dir.display(),
                    "holds more than {MAX_SKILLS} skills; `{name}` and those after it are not served"
                );
                break;
            }
            let stamp = self.stamp(&name);
            let kept = before
                .iter()
                .find(|meta| meta.name == name && meta.stamp == stamp)
                .cloned();
            let meta = match kept.map_or_else(|| self.read_meta(&name, stamp), Ok) {
                Ok(meta) => meta,
                Err(error) => {
                    tracing::warn!("skill `{name}` is skipped: {error}");
                    continue;
                }
            };
            if bytes + meta.size() > MAX_FOLDER_BYTES {
                tracing::warn!(
                    dir = %self.dir.display(),
                    "skill `{name}` is skipped: the skills before it take {bytes} bytes, and its \
                     {} would pass the folder's budget of {MAX_FOLDER_BYTES} bytes",
                    meta.size()
                );
                continue;
            }
            bytes += meta.size();
            metas.push(meta);
        }
        let metas = Arc::new(metas);
        if let Ok(mut index) = self.index.write() {
            *index = metas.clone();
        }
        metas
    }

    /// The three files of a skill, as text: `SKILL.md`, `skill.ts`, `args.json` if present.
    fn read_files(&self, name: &str) -> Result<(String, String, Option<String>), String> {
        valid_name(name)?;
        let folder = self.dir.join(name);
        let manifest = read_bounded(&folder.join("SKILL.md"))?;
        let code = read_bounded(&folder.join("skill.ts"))?;
        let args_path = folder.join("args.json");
        let args = if args_path.exists() {
            Some(read_bounded(&args_path)?)
        } else {
            None
        };
        Ok((manifest, code, args))
    }

    /// One skill, by name, whole (its program included).
    pub fn read(&self, name: &str) -> Result<Skill, String> {
        let (manifest, code, args) = self.read_files(name)?;
        self.parse(name, &manifest, code, args.as_deref())
    }

    fn parse(
        &self,
        name: &str,
        manifest: &str,
        code: String,
        args: Option<&str>,
    ) -> Result<Skill, String> {
        let folder = self.dir.join(name);
        let (frontmatter_name, description) = frontmatter(manifest).ok_or_else(|| {
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
        let args = args
            .map(|text| {
                serde_json::from_str(text)
                    .map_err(|e| format!("{}: not JSON: {e}", folder.join("args.json").display()))
            })
            .transpose()?;
        Ok(Skill {
            name: name.to_owned(),
            description,
            code,
            args,
        })
    }

    /// Each of a skill's files' [`file_stamp`] (zeros for one missing).
    fn stamp(&self, name: &str) -> Vec<(u64, u64, i64, i64)> {
        FILES
            .iter()
            .map(|(file, _)| {
                std::fs::metadata(self.dir.join(name).join(file))
                    .map_or((0, 0, 0, 0), |m| file_stamp(&m))
            })
            .collect()
    }

    /// One skill's [`SkillMeta`], read from its files (which are then let go).
    fn read_meta(&self, name: &str, stamp: Vec<(u64, u64, i64, i64)>) -> Result<SkillMeta, String> {
        let (manifest, code, args_text) = self.read_files(name)?;
        let mut files = vec![file_meta("SKILL.md", manifest.as_bytes())];
        files.push(file_meta("skill.ts", code.as_bytes()));
        if let Some(text) = &args_text {
            files.push(file_meta("args.json", text.as_bytes()));
        }
        let names = crate::vfs::named_modules(&code);
        let skill = self.parse(name, &manifest, code, args_text.as_deref())?;
        Ok(SkillMeta {
            signature: signature(&skill),
            params: skill
                .args
                .as_ref()
                .and_then(|args| args.get("properties"))
                .and_then(Value::as_object)
                .map(|properties| properties.keys().take(50).cloned().collect())
                .unwrap_or_default(),
            header: header(&skill).into(),
            name: skill.name,
            description: skill.description,
            files,
            names,
            stamp,
        })
    }

    /// How many skills the folder holds and the bytes their files take, leaving out `except`
    /// (the one a save replaces). Only sizes are read.
    fn usage(&self, except: &str) -> (usize, u64) {
        let mut count = 0;
        let mut bytes = 0;
        for name in self.names().iter().filter(|name| *name != except) {
            count += 1;
            for (file, _) in FILES {
                bytes += std::fs::metadata(self.dir.join(name).join(file)).map_or(0, |m| m.len());
            }
        }
        (count, bytes)
    }

    /// Checks and saves a skill; the message says what was written.
    pub fn save(&self, request: SaveRequest) -> Result<String, String> {
        let skill = &request.skill;
        check(skill)?;
        let manifest_text = manifest(skill);
        let args_text = skill
            .args
            .as_ref()
            .map(|args| serde_json::to_string_pretty(args).unwrap_or_default() + "\n");
        let size = (manifest_text.len()
            + skill.code.len()
            + args_text.as_ref().map_or(0, String::len)) as u64;
        let _saving = SAVING.lock().unwrap_or_else(|p| p.into_inner());
        let folder = self.dir.join(&skill.name);
        let exists = folder.exists();
        if exists && !request.overwrite {
            return Err(format!(
                "skill `{}` exists ({}); pass `overwrite: true` to replace it",
                skill.name,
                folder.display()
            ));
        }
        let (count, used) = self.usage(&skill.name);
        if count >= MAX_SKILLS {
            return Err(format!(
                "the skills folder {} holds {count} skills, the most it may ({MAX_SKILLS}); \
                 delete one first (`runbyte skills delete NAME`)",
                self.dir.display()
            ));
        }
        if used + size > MAX_FOLDER_BYTES {
            return Err(format!(
                "skill `{}` takes {size} bytes and the skills folder {} holds {used} already: \
                 together they pass its budget of {} MiB ({MAX_FOLDER_BYTES} bytes); delete a \
                 skill first (`runbyte skills delete NAME`)",
                skill.name,
                self.dir.display(),
                MAX_FOLDER_BYTES / (1024 * 1024)
            ));
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let nonce = nonce();
        let fresh = self.dir.join(format!(".{}.new-{nonce}", skill.name));
        let written = (|| -> std::io::Result<()> {
            std::fs::create_dir(&fresh)?;
            std::fs::write(fresh.join("SKILL.md"), &manifest_text)?;
            std::fs::write(fresh.join("skill.ts"), &skill.code)?;
            if let Some(text) = &args_text {
                std::fs::write(fresh.join("args.json"), text)?;
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

fn file_meta(file: &'static str, bytes: &[u8]) -> FileMeta {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    FileMeta {
        file,
        mime: FILES
            .iter()
            .find(|(known, _)| *known == file)
            .map_or("text/plain", |(_, mime)| mime),
        size: bytes.len() as u64,
        sha256: digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
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
    /// its frontmatter, and a manifest of its files with their SHA-256 digests (from memory).
    pub fn mcp_skills(&self) -> Vec<rmcp::model::Skill> {
        self.index().iter().filter_map(mcp_skill).collect()
    }

    /// One skill's SEP-2640 entry, by the URI of its `SKILL.md`.
    pub fn mcp_skill_at(&self, uri: &str) -> Option<rmcp::model::Skill> {
        let name = uri.strip_prefix(SKILL_SCHEME)?.strip_suffix("/SKILL.md")?;
        self.index()
            .iter()
            .find(|meta| meta.name == name)
            .and_then(mcp_skill)
    }

    /// The skills' files as resources (`skill://<name>/<file>`), from memory.
    pub fn resources(&self) -> Vec<rmcp::model::Resource> {
        let mut out = Vec::new();
        for skill in self.index().iter() {
            for file in &skill.files {
                // A SKILL.md is named by its skill (SEP-2640); the other files by path.
                let name = if file.file == "SKILL.md" {
                    skill.name.clone()
                } else {
                    format!("{}/{}", skill.name, file.file)
                };
                let mut resource = rmcp::model::Resource::new(
                    format!("{SKILL_SCHEME}{}/{}", skill.name, file.file),
                    name,
                )
                .with_mime_type(file.mime);
                if file.file == "SKILL.md" {
                    resource = resource.with_description(skill.description.clone());
                }
                out.push(resource);
            }
        }
        out
    }

    /// A skill file's text and MIME type, by its `skill://` URI; `None` for a URI that names no
    /// served skill's file (only the files a skill holds are served, never another path). A
    /// blocking read.
    pub fn read_resource(&self, uri: &str) -> Option<(String, &'static str)> {
        let (name, file) = uri.strip_prefix(SKILL_SCHEME)?.split_once('/')?;
        valid_name(name).ok()?;
        let (file, mime) = FILES.iter().find(|(known, _)| *known == file)?;
        let text = read_bounded(&self.dir.join(name).join(file)).ok()?;
        Some((text, mime))
    }
}

fn mcp_skill(meta: &SkillMeta) -> Option<rmcp::model::Skill> {
    let name = &meta.name;
    let files = meta
        .files
        .iter()
        .map(|file| {
            rmcp::model::SkillResource::new(
                format!("{SKILL_SCHEME}{name}/{}", file.file),
                format!("sha256:{}", file.sha256),
                file.size,
            )
        })
        .collect();
    let skill = rmcp::model::Skill::new(
        format!("{SKILL_SCHEME}{name}/SKILL.md"),
        rmcp::model::SkillFrontmatter::new(name, &meta.description),
        rmcp::model::SkillResources::Files(files),
    );
    skill.validate().ok().map(|()| skill)
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

/// Everything a skill must be before it is saved: its generated module
/// (`/skills/<name>.ts`, the header and the program) compiles, and its header is one comment.
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
    let path = format!("{ROOT}/{}.ts", skill.name);
    crate::sandbox::transpile(&skill.code, &path)
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
        if args.to_string().len() > MAX_ARGS_BYTES {
            return Err(format!(
                "`args` is larger than {} KiB",
                MAX_ARGS_BYTES / 1024
            ));
        }
    }
    // The header is rendered comment-safe; this says so again where it matters, and a module
    // that would not compile is refused here, not where a program imports it.
    let header = header(skill);
    if !is_one_comment(&header) {
        return Err(format!(
            "the module {path} this skill would make does not start with one comment; \
             nothing was saved (this is a bug in Runbyte: please report it)"
        ));
    }
    crate::sandbox::transpile(&format!("{header}{}", skill.code), &path).map_err(|error| {
        format!(
            "the module {path} this skill would make does not compile: {}",
            error.message
        )
    })?;
    Ok(())
}

/// Whether `text` is one block comment and a line feed: it closes where it ends, not before.
fn is_one_comment(text: &str) -> bool {
    text.starts_with("/**")
        && text.find("*/") == Some(text.len().saturating_sub(3))
        && text.ends_with("*/\n")
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

/// The skill's signature: `function weeklyReport(args: { city: string; }): Promise<unknown>`.
/// Every name and literal from the schema that is not a plain identifier is a JSON string
/// literal in pure ASCII (the renderer's [`render::key`] and literals); a type longer than
/// 8 KiB is `Record<string, unknown>`.
pub fn signature(skill: &Skill) -> String {
    let args = match &skill.args {
        Some(schema) => {
            let mut rendered = args_type(schema);
            if rendered.len() > MAX_SIGNATURE_BYTES {
                rendered = UNTYPED.to_owned();
            }
            format!("args: {rendered}")
        }
        None => String::new(),
    };
    format!(
        "function {}({args}): Promise<unknown>",
        identifier(&skill.name)
    )
}

/// The skill's argument type, written by the dialects' renderer (`runbyte-codegen-common`), so
/// that a skill's signature reads as a tool's: the argument object as a list of its
/// properties, `{ city: string; days?: number; }`, each property's type the renderer's. A
/// `$ref` is `unknown` (the skill's module declares no named types), and a schema the renderer
/// cannot type is `Record<string, unknown>`, as for a tool.
fn args_type(schema: &Value) -> String {
    let Ok(converted) = schema::convert(Role::Args, schema) else {
        return UNTYPED.to_owned();
    };
    let names = DeclNames {
        roots: [UNKNOWN.to_owned(), UNKNOWN.to_owned()],
        defs: Default::default(),
    };
    let style = Style {
        names: &names,
        generic_arrays: false,
        block: None,
    };
    match &converted.ty {
        Ty::Object(object) if object.index.is_none() && !object.props.is_empty() => {
            let mut out = String::from("{ ");
            for prop in &object.props {
                render::key(&mut out, &prop.key);
                out.push_str(if prop.optional { "?: " } else { ": " });
                out.push_str(&style.render(&prop.ty));
                out.push_str("; ");
            }
            out.push('}');
            out
        }
        ty => style.render(ty),
    }
}

/// The type of an argument the renderer cannot type.
const UNTYPED: &str = "Record<string, unknown>";

/// The type of a named type the skill's module does not declare.
const UNKNOWN: &str = "unknown";

/// The comment that heads `/skills/<name>.ts`: the description, the signature and how to
/// import it. Every line is made comment-safe ([`comment_line`]: no `*/`, no line terminator,
/// no control or bidi character), so nothing from the client gets out of the comment.
fn header(skill: &Skill) -> String {
    let mut header = String::from("/**\n");
    for line in js_lines(skill.description.trim()) {
        let line = comment_line(line);
        if line.is_empty() {
            header.push_str(" *\n");
        } else {
            let _ = writeln!(header, " * {line}");
        }
    }
    let _ = writeln!(
        header,
        " *\n * {}\n * Import: import {} from './skills/{}';\n */",
        comment_line(&format!(
            "Saved skill `{}`: export default {}",
            skill.name,
            signature(skill)
        )),
        identifier(&skill.name),
        skill.name
    );
    header
}

/// The text of `/skills/<name>.ts`: its header, then its program as saved. Read from the
/// skill's folder when needed; a `skill.ts` changed on disk since the folder was read is
/// refused (what runs is what the header and the digests describe).
fn module_text(dir: &Path, name: &str, header: &str, sha256: &str) -> Result<Arc<str>, String> {
    let path = dir.join(name).join("skill.ts");
    let code = read_bounded(&path)?;
    if file_meta("skill.ts", code.as_bytes()).sha256 != sha256 {
        return Err(format!(
            "skill `{name}` changed on disk ({}) since Runbyte read the skills folder; save it \
             again with save_skill, or restart Runbyte",
            path.display()
        ));
    }
    Ok(format!("{header}{code}").into())
}

/// The skills as the VFS serves them: `/skills/<name>.ts` (a header saying what the skill is and
/// how to import it, then the program, read from disk when needed) and an entry each for
/// listing and search.
pub fn vfs_files(
    skills: &Skills,
    index: &[SkillMeta],
) -> (Vec<(String, Arc<File>)>, Vec<ToolEntry>) {
    let mut files = Vec::new();
    let mut entries = Vec::new();
    for skill in index {
        let path = format!("{ROOT}/{}.ts", skill.name);
        let Some(code) = skill.files.iter().find(|f| f.file == "skill.ts") else {
            continue;
        };
        let (dir, name, header, sha256) = (
            skills.dir.clone(),
            skill.name.clone(),
            skill.header.clone(),
            code.sha256.clone(),
        );
        files.push((
            path.clone(),
            File::on_disk(skill.names.clone(), move || {
                module_text(&dir, &name, &header, &sha256)
            }),
        ));
        entries.push(ToolEntry {
            server: "skills".to_owned(),
            name: skill.name.clone(),
            identifier: identifier(&skill.name),
            path,
            signature: skill.signature.clone(),
            summary: skill
                .description
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
            description: skill.description.to_lowercase(),
            params: skill.params.clone(),
        });
    }
    (files, entries)
}

/// What tells a skill file changed without reading it: on Unix its inode, size and change time
/// (a rename into place or an edit changes them); elsewhere its size and modification time.
#[cfg(unix)]
fn file_stamp(metadata: &std::fs::Metadata) -> (u64, u64, i64, i64) {
    use std::os::unix::fs::MetadataExt as _;
    (
        metadata.ino(),
        metadata.len(),
        metadata.ctime(),
        metadata.ctime_nsec(),
    )
}

#[cfg(not(unix))]
fn file_stamp(metadata: &std::fs::Metadata) -> (u64, u64, i64, i64) {
    let modified = metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    (
        0,
        metadata.len(),
        i64::try_from(modified.as_secs()).unwrap_or(i64::MAX),
        i64::from(modified.subsec_nanos()),
    )
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

    fn names(skills: &Skills) -> Vec<String> {
        skills.refresh().iter().map(|m| m.name.clone()).collect()
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
        assert_eq!(skills.read("add-two").unwrap(), changed);
        assert_eq!(names(&skills), ["add-two"]);
        assert_eq!(skills.index()[0].description, "Adds.");
        // Nothing left behind but the skill.
        let listed: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        assert_eq!(listed, vec!["add-two"]);
        skills.delete("add-two").unwrap();
        assert!(names(&skills).is_empty());
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

    fn module_of(skills: &Skills, name: &str) -> String {
        let index = skills.refresh();
        let (files, _) = vfs_files(skills, &index);
        let path = format!("/skills/{name}.ts");
        let (_, file) = files.iter().find(|(p, _)| *p == path).unwrap();
        file.text().unwrap().to_string()
    }

    #[test]
    fn the_module_says_what_the_skill_is_and_keeps_the_comment_closed() {
        let dir = temp();
        let skills = Skills::new(Some(&dir));
        skills
            .save(SaveRequest {
                skill: skill("add-two"),
                overwrite: false,
            })
            .unwrap();
        let text = module_of(&skills, "add-two");
        assert!(
            text.starts_with("/**\n * Sums two numbers. *\\/ not the end\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "export default function addTwo(args: { a: number; b: number; \"the label\"?: string; }): Promise<unknown>"
            ),
            "{text}"
        );
        let index = skills.index();
        let (files, entries) = vfs_files(&skills, &index);
        assert_eq!(entries[0].path, "/skills/add-two.ts");
        assert_eq!(entries[0].params, vec!["a", "b", "the label"]);
        // Only the header is held: the program is read when the module is, and a program
        // changed on disk behind Runbyte's back is refused by name, not run.
        assert!(files[0].1.is_on_disk());
        std::fs::write(
            dir.join("add-two/skill.ts"),
            "export default async function () { return 'changed'; }\n",
        )
        .unwrap();
        let error = files[0].1.text().unwrap_err();
        assert!(error.contains("skill `add-two` changed on disk"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The schema that closed the comment before the fix: an enum value and a property name
    /// with `*/`, code, and `/*` to swallow the rest of the line.
    fn injecting() -> Skill {
        let mut hostile = skill("inject");
        hostile.args = Some(json!({"type": "object", "properties": {
            "mode": {"enum": ["*/ globalThis.pwned = 1; /*"]},
            "*/ globalThis.pwned = 2; /*": {"type": "string"}
        }}));
        hostile
    }

    /// The property schemas whose types the two renderers once wrote differently.
    fn property_schemas() -> Vec<Value> {
        vec![
            json!({"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}),
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array"}),
            json!({"enum": ["x", 1, null, [1], {"k": 2}]}),
            json!({"const": "k"}),
            json!({"type": ["string", "null"]}),
            json!({"anyOf": [{"type": "string"}, {"type": "number"}]}),
            json!({"type": "object", "additionalProperties": {"type": "number"}}),
            json!({"enum": ["*/ globalThis.pwned = 1; /*", "\u{2028}"]}),
        ]
    }

    #[test]
    fn a_skills_argument_types_are_the_dialects() {
        for property in property_schemas() {
            let schema = json!({"type": "object", "properties": {"a": property}});
            let mut typed = skill("typed");
            typed.args = Some(schema.clone());
            let ours = signature(&typed);
            let tool = json!({"name": "typed", "inputSchema": schema});
            let server = runbyte_codegen_common::plan::plan("s", "s", &[tool]);
            let theirs = server.tools[0].signature();
            // The dialect's `typed(args?: { a?: T }): Promise<unknown>`; ours
            // `function typed(args: { a?: T; }): Promise<unknown>`.
            let t = theirs
                .strip_prefix("typed(args?: { a?: ")
                .and_then(|rest| rest.strip_suffix(" }): Promise<unknown>"))
                .unwrap_or_else(|| panic!("{theirs}"));
            assert_eq!(
                ours,
                format!("function typed(args: {{ a?: {t}; }}): Promise<unknown>"),
                "{property}"
            );
        }
    }

    #[test]
    fn the_signature_writes_each_schema_as_the_renderer_does() {
        let cases = [
            (
                json!({"type": "object", "properties": {
                    "z": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer"}}}},
                    "a b": {"type": "string"},
                    "id": {"type": ["string", "null"]},
                }, "required": ["id"]}),
                "{ id: string | null; \"a b\"?: string; z?: { b?: number }[]; }",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"type": "string"}}}),
                "{ a?: unknown; }",
            ),
            (json!({"type": "object"}), "{}"),
            (
                json!({"type": "object", "additionalProperties": {"type": "number"}}),
                "{ [key: string]: number }",
            ),
            (json!({"type": "string"}), "string"),
            (
                json!({"$ref": "https://example.com/elsewhere"}),
                "Record<string, unknown>",
            ),
        ];
        for (schema, expected) in cases {
            let mut typed = skill("typed");
            typed.args = Some(schema.clone());
            assert_eq!(
                signature(&typed),
                format!("function typed(args: {expected}): Promise<unknown>"),
                "{schema}"
            );
        }
    }

    #[test]
    fn code_in_an_args_schema_stays_in_the_comment() {
        let dir = temp();
        let skills = Skills::new(Some(&dir));
        skills
            .save(SaveRequest {
                skill: injecting(),
                overwrite: false,
            })
            .unwrap();
        let text = module_of(&skills, "inject");
        let header_end = text.find("*/").unwrap();
        assert!(
            text[header_end..].starts_with("*/\nexport default async function"),
            "{text}"
        );
        assert!(text[..header_end].contains("pwned"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Hostile text for schemas: the ways out of a comment or a string, line terminators,
    /// controls, bidi and invisible characters, template syntax, long runs.
    fn hostile_strings() -> Vec<String> {
        let pieces = [
            "*/",
            "/*",
            "*",
            "/",
            "\n",
            "\r",
            "\r\n",
            "\u{2028}",
            "\u{2029}",
            "\u{0}",
            "\u{1b}]52;c;eA==\u{7}",
            "\u{202e}",
            "\u{2066}",
            "\u{200b}",
            "\u{feff}",
            "`",
            "${",
            "}",
            "'",
            "\"",
            "\\",
            "<!--",
            "-->",
            "globalThis.pwned = 1;",
            "})(); globalThis.pwned = 1; (() => {",
            "//",
            "ünïcode",
            "😀",
            "@param",
            "</script>",
            "\\u002a/",
        ];
        let mut out: Vec<String> = pieces.iter().map(|p| (*p).to_owned()).collect();
        // Every pair, and a few longer generated mixes (a fixed seed: failures reproduce).
        for a in &pieces {
            for b in &pieces {
                out.push(format!("{a}{b}"));
            }
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..300 {
            let mut text = String::new();
            for _ in 0..6 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(pieces[(seed % pieces.len() as u64) as usize]);
            }
            out.push(text);
        }
        out
    }

    /// The corpus of hostile skills kept in `tests/corpus/skills/` (every input that broke the
    /// generated module), as skills.
    fn corpus() -> Vec<(String, Skill)> {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/skills");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(folder).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((
                path.display().to_string(),
                Skill {
                    name: value["name"].as_str().unwrap().to_owned(),
                    description: value["description"].as_str().unwrap().to_owned(),
                    code: "export default async function (args: unknown) { return args; }\n"
                        .to_owned(),
                    args: value.get("args").cloned(),
                },
            ));
        }
        assert!(out.len() >= 5, "the corpus is {folder}");
        out
    }

    #[test]
    fn generated_hostile_schemas_make_a_module_whose_header_is_one_comment_and_compiles() {
        let mut cases: Vec<(String, Skill)> = corpus();
        for (n, text) in hostile_strings().into_iter().enumerate() {
            let mut hostile = skill(&format!("gen-{n}"));
            hostile.description = format!("Hostile {n}: {text}");
            hostile.args = Some(json!({"type": "object", "properties": {
                text.clone(): {"enum": [text.clone(), 1, null, [text.clone()], {"k": text.clone()}]},
                "nested": {"type": "array", "items": {"type": "object", "properties": {text.clone(): {"enum": [text.clone()]}}}},
            }}));
            cases.push((format!("generated {n}: {text:?}"), hostile));
        }
        for (what, hostile) in cases {
            check(&hostile).unwrap_or_else(|e| panic!("{what}: refused: {e}"));
            let header = header(&hostile);
            assert!(is_one_comment(&header), "{what}:\n{header}");
            assert!(
                !header.contains(['\r', '\u{2028}', '\u{2029}', '\u{202e}', '\u{1b}']),
                "{what}:\n{header}"
            );
            assert_eq!(
                header.lines().count() + 1,
                header.split('\n').count(),
                "{what}"
            );
        }
    }

    #[test]
    fn the_folder_has_a_budget_in_skills_and_bytes() {
        let dir = temp();
        let skills = Skills::new(Some(&dir));
        // Filled by hand past the count: only the first MAX_SKILLS are served.
        for n in 0..MAX_SKILLS {
            let folder = dir.join(format!("s{n:03}"));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(
                folder.join("SKILL.md"),
                format!("---\nname: s{n:03}\ndescription: x\n---\n"),
            )
            .unwrap();
            std::fs::write(folder.join("skill.ts"), "export default 1;\n").unwrap();
        }
        let error = skills
            .save(SaveRequest {
                skill: skill("one-more"),
                overwrite: false,
            })
            .unwrap_err();
        assert!(
            error.contains("holds 256 skills, the most it may (256)"),
            "{error}"
        );
        // Replacing one is no new skill.
        let mut replaced = skill("s000");
        replaced.description = "replaced".to_owned();
        skills
            .save(SaveRequest {
                skill: replaced,
                overwrite: true,
            })
            .unwrap();
        assert_eq!(skills.refresh().len(), MAX_SKILLS);
        let _ = std::fs::remove_dir_all(&dir);

        // The bytes: a folder near its budget refuses a skill that would pass it, naming it.
        let dir = temp();
        let skills = Skills::new(Some(&dir));
        // 64 skills of 1 MiB less 5 bytes each: 320 bytes under the budget.
        let big = "x".repeat(MAX_FILE_BYTES as usize - 57);
        for n in 0..(MAX_FOLDER_BYTES / MAX_FILE_BYTES) {
            let folder = dir.join(format!("b{n:03}"));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(
                folder.join("SKILL.md"),
                format!("---\nname: b{n:03}\ndescription: x\n---\n{big}"),
            )
            .unwrap();
            std::fs::write(folder.join("skill.ts"), "export default 1;\n").unwrap();
        }
        let error = skills
            .save(SaveRequest {
                skill: skill("too-much"),
                overwrite: false,
            })
            .unwrap_err();
        assert!(
            error.contains("pass its budget of 64 MiB") && error.contains("too-much"),
            "{error}"
        );
        // What is held of each is its name, description and digests, never its files.
        let index = skills.refresh();
        assert_eq!(index.len(), (MAX_FOLDER_BYTES / MAX_FILE_BYTES) as usize);
        let held: usize = index
            .iter()
            .map(|m| m.header.len() + m.description.len() + m.names.len() + m.signature.len())
            .sum();
        assert!(held < 64 * 1024, "{held} bytes held");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
