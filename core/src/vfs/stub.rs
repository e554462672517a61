//! What the sandbox runs for a server's index module: small forwarders, not every tool's module.
//!
//! A dialect's index re-exports each tool's module (`export * from "./create_issue";`), so a
//! program importing one function from it, or the whole `/servers` namespace, made QuickJS load,
//! compile and evaluate every module of the server (of every server). The stub exports one
//! async function per tool under the same name, which loads that tool's module on its first call
//! (a dynamic `import`, compiled once per worker and generation) and calls it. Importing a
//! server's index or `/servers` costs the stubs, and an execution loads only the modules of the
//! tools it calls.
//!
//! The stub is made only when the index is exactly that shape and every module it re-exports is
//! a tool's whose function is known; anything else (another dialect's index, a hand-made module)
//! runs as written.

use std::fmt::Write as _;

use super::ToolEntry;

/// The sandbox's JavaScript for the index module `index_path` whose text is `index`, given the
/// folder's tools; `None` when the index is not a plain list of tool re-exports.
pub fn index_stub(index_path: &str, index: &str, tools: &[ToolEntry]) -> Option<String> {
    let (dir, file) = index_path.rsplit_once('/')?;
    let extension = file.strip_prefix("index.")?;
    let folder = serde_json::to_string(&format!("{dir}/")).ok()?;
    // One small closure per tool (cheaper to compile than a function body each).
    let mut out = format!(
        "// Each tool's module is loaded when the tool is first called (core/src/vfs/stub.rs).\n\
         const __load = (file, key) => async (...args) => (await import({folder} + file))[key](...args);\n"
    );
    for line in index.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("//") || line == "export {};" {
            continue;
        }
        let literal = line.strip_prefix("export * from ")?.strip_suffix(';')?;
        let target: String = serde_json::from_str(literal).ok()?;
        let name = target.strip_prefix("./")?;
        if name.is_empty() || name.contains('/') {
            return None;
        }
        let path = format!("{dir}/{name}.{extension}");
        let tool = tools.iter().find(|tool| tool.path == path)?;
        let identifier = &tool.identifier;
        let plain = !identifier.is_empty()
            && identifier
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
            && !identifier.starts_with(|c: char| c.is_ascii_digit());
        // A tool named like the helper would shadow it.
        if !plain || identifier == "__load" {
            return None;
        }
        let file = serde_json::to_string(&format!("{name}.{extension}")).ok()?;
        let key = serde_json::to_string(identifier).ok()?;
        let _ = writeln!(out, "export const {identifier} = __load({file}, {key});");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn tool(name: &str) -> ToolEntry {
        ToolEntry {
            server: "demo".into(),
            name: name.replace('_', "-"),
            identifier: name.into(),
            path: format!("/servers/demo/{name}.ts"),
            signature: String::new(),
            summary: String::new(),
            description: String::new(),
            params: Vec::new(),
        }
    }

    #[test]
    fn a_plain_index_becomes_one_forwarder_per_tool() {
        let tools = [tool("add_numbers"), tool("echo")];
        let index = "// Warning: some tools of server `demo` are not as it lists them:\n\
                     //   x\nexport * from \"./add_numbers\";\nexport * from \"./echo\";\n";
        let stub = index_stub("/servers/demo/index.ts", index, &tools).unwrap();
        assert!(
            stub.contains("(await import(\"/servers/demo/\" + file))[key]"),
            "{stub}"
        );
        assert!(
            stub.contains("export const echo = __load(\"echo.ts\", \"echo\");"),
            "{stub}"
        );
        assert_eq!(stub.matches("export const").count(), 2);
        let empty = index_stub("/servers/demo/index.ts", "export {};\n", &[]).unwrap();
        assert!(!empty.contains("export const"));
    }

    #[test]
    fn anything_else_runs_as_written() {
        let tools = [tool("echo")];
        for index in [
            "export * from \"./other\";\n",
            "export * from \"./echo\";\nexport const x = 1;\n",
            "export * from \"../elsewhere/echo\";\n",
            "export { echo } from \"./echo\";\n",
        ] {
            assert_eq!(
                index_stub("/servers/demo/index.ts", index, &tools),
                None,
                "{index}"
            );
        }
    }
}
