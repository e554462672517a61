//! MCP Apps (SEP-1865) through Runbyte, and verbatim resource URIs: the built `runbyte serve`
//! over stdio, spoken to line by line in both revisions (a 2025-11-25 `initialize` session and
//! 2026-07-28 requests without a handshake), in front of the test server's `--mode apps` over
//! stdio and over streamable HTTP.
//!
//! A host reads a tool's `_meta.ui.resourceUri` with `resources/read` and expects a `ui://` URI:
//! Runbyte gives `ui://<server>/<rest>`, everywhere it shows one; a server exposed directly with
//! `direct-prefix = ""` has its URIs shown as they are.

use runbyte_tests::{Background, JsonLines, config_of, result_json, test_server_table};
use serde_json::{Value, json};

const MIME: &str = "text/html;profile=mcp-app";
const EXTENSION: &str = "io.modelcontextprotocol/ui";

/// How one revision's requests are made on a `runbyte serve`.
#[derive(Clone, Copy, Debug)]
enum Era {
    /// 2025-11-25: `initialize` first, then requests as they are.
    Initialize,
    /// 2026-07-28: no handshake; every request carries its version in `_meta`.
    Stateless,
}

/// A `runbyte serve` spoken to in one revision.
struct Client {
    lines: JsonLines,
    era: Era,
    next: u64,
}

impl Client {
    fn start(config: &str, era: Era) -> Client {
        let mut client = Client {
            lines: JsonLines::start(config),
            era,
            next: 1,
        };
        if let Era::Initialize = era {
            let init = client.lines.request(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {
                           "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}},
                       "clientInfo": {"name": "apps-test", "version": "1"}}),
            );
            assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
            let declared = &init["result"]["capabilities"]["extensions"][EXTENSION];
            assert_eq!(declared["mimeTypes"], json!([MIME]), "{init}");
            client.lines.notify("notifications/initialized", json!({}));
        }
        if let Era::Stateless = era {
            let discovered = client.result("server/discover", json!({}));
            let declared = &discovered["capabilities"]["extensions"][EXTENSION];
            assert_eq!(declared["mimeTypes"], json!([MIME]), "{discovered}");
        }
        client
    }

    /// The answer to `method` with `params` (the JSON-RPC message, `result` or `error`).
    fn ask(&mut self, method: &str, mut params: Value) -> Value {
        if let Era::Stateless = self.era {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {
                    "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}},
                "io.modelcontextprotocol/clientInfo": {"name": "apps-test", "version": "1"},
            });
        }
        self.next += 1;
        self.lines.request(self.next, method, params)
    }

    fn result(&mut self, method: &str, params: Value) -> Value {
        let answer = self.ask(method, params);
        assert!(
            answer.get("error").is_none(),
            "{method} ({:?}): {answer}",
            self.era
        );
        answer["result"].clone()
    }

    fn tools(&mut self) -> Vec<Value> {
        self.result("tools/list", json!({}))["tools"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn resources(&mut self) -> Vec<Value> {
        self.result("resources/list", json!({}))["resources"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn templates(&mut self) -> Vec<String> {
        self.result("resources/templates/list", json!({}))["resourceTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["uriTemplate"].as_str().unwrap().to_owned())
            .collect()
    }

    fn read(&mut self, uri: &str) -> Value {
        let result = self.result("resources/read", json!({"uri": uri}));
        let contents = result["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 1, "{result}");
        contents[0].clone()
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.result("tools/call", json!({"name": tool, "arguments": arguments}))
    }
}

fn named<'a>(items: &'a [Value], key: &str, name: &str) -> Option<&'a Value> {
    items.iter().find(|item| item[key] == name)
}

/// What a client must see of server `server` (`--mode apps`, exposed directly and to programs
/// with its default prefix): the UI resource under `ui://<server>/`, in the tools' `_meta`, the
/// listing, a read, a template, a tool's result and a program's.
fn sees_the_app(client: &mut Client, server: &str) {
    let ui = format!("ui://{server}/dashboard/main.html");
    let era = client.era;

    // The tool's `_meta.ui.resourceUri` (and the deprecated flat key) is the URI the client
    // reads; the other `_meta.ui` fields pass as the server gave them.
    let tools = client.tools();
    let show = named(&tools, "name", &format!("{server}_show_dashboard"))
        .unwrap_or_else(|| panic!("{era:?}: no {server}_show_dashboard in {tools:#?}"));
    assert_eq!(show["_meta"]["ui"]["resourceUri"], ui, "{era:?}: {show}");
    assert_eq!(show["_meta"]["ui/resourceUri"], ui, "{era:?}: {show}");
    assert_eq!(show["_meta"]["ui"]["visibility"], json!(["model", "app"]));
    // An app-only tool reaches the client (the host, which keeps it from its model and lets
    // the app call it), its `_meta` rewritten the same way.
    let refresh = named(&tools, "name", &format!("{server}_refresh_dashboard")).unwrap();
    assert_eq!(
        refresh["_meta"]["ui"],
        json!({"resourceUri": ui, "visibility": ["app"]}),
        "{era:?}"
    );

    // Listed with the scheme kept, its MIME type and `_meta.ui` intact.
    let resources = client.resources();
    let listed = named(&resources, "uri", &ui)
        .unwrap_or_else(|| panic!("{era:?}: {ui} not in {resources:#?}"));
    assert_eq!(listed["mimeType"], MIME);
    assert_eq!(
        listed["_meta"]["ui"]["csp"]["connectDomains"],
        json!(["https://api.example.com"])
    );
    let readme = format!("runbyte://{server}/test://apps/readme.txt");
    assert!(
        named(&resources, "uri", &readme).is_some(),
        "{resources:#?}"
    );
    assert!(
        client
            .templates()
            .contains(&format!("ui://{server}/dashboard/{{view}}")),
        "{era:?}"
    );

    // Read by that URI: the server's HTML, MIME type and `_meta.ui`.
    let page = client.read(&ui);
    assert_eq!(page["uri"], ui, "{era:?}: {page}");
    assert_eq!(page["mimeType"], MIME, "{era:?}: {page}");
    assert!(
        page["text"]
            .as_str()
            .unwrap()
            .starts_with("<!DOCTYPE html><html><head><title>dashboard</title>"),
        "{page}"
    );
    assert_eq!(
        page["_meta"]["ui"],
        json!({"csp": {"connectDomains": ["https://api.example.com"],
                       "resourceDomains": ["https://cdn.example.com"]},
               "prefersBorder": true}),
        "{era:?}"
    );
    // A template's expansion reads too.
    let weekly = client.read(&format!("ui://{server}/dashboard/weekly"));
    assert!(
        weekly["text"]
            .as_str()
            .unwrap()
            .contains("<title>weekly</title>")
    );
    // A ui:// URI of no configured server is -32602, naming the URI.
    let unknown = client.ask("resources/read", json!({"uri": "ui://nobody/x"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // A direct call's resource link and embedded resource carry the URIs the client reads.
    let called = client.call(&format!("{server}_show_dashboard"), json!({}));
    let content = called["content"].as_array().unwrap();
    // Runbyte declared the MCP Apps extension to the server (which may offer its UI only then).
    assert_eq!(
        content[0]["text"], "the dashboard is ready; the client declares MCP Apps",
        "{era:?}: {called}"
    );
    assert_eq!(content[1]["type"], "resource_link", "{called}");
    assert_eq!(content[1]["uri"], ui, "{called}");
    assert_eq!(content[2]["resource"]["uri"], readme, "{called}");

    // A program gets the same URIs, reads the UI resource by its link, and what it returns of
    // it reaches the client as a block with that URI.
    let code = format!(
        "import {{ show_dashboard }} from './servers/{server}';\n\
         import {{ readResource }} from './servers/resources';\n\
         const shown = await show_dashboard({{}});\n\
         const link = shown.find((block) => block.type === 'resource_link');\n\
         const [page] = await readResource(link.uri);\n\
         export default {{ link, uri: page.uri, mime: page.mimeType, \
                           embedded: shown[2].resource.uri }};"
    );
    let ran = client.call("execute_code", json!({"code": code}));
    let blocks = ran["content"].as_array().unwrap();
    assert_ne!(ran["isError"], true, "{era:?}: {ran}");
    let value = result_json(blocks[0]["text"].as_str().unwrap());
    assert_eq!(value["uri"], ui, "{era:?}: {ran}");
    assert_eq!(value["mime"], MIME, "{ran}");
    assert_eq!(value["embedded"], readme, "{ran}");
    let link = blocks
        .iter()
        .find(|block| block["type"] == "resource_link")
        .unwrap_or_else(|| panic!("{era:?}: no resource_link block in {ran}"));
    assert_eq!(link["uri"], ui, "{ran}");

    // An app-only tool is not the model's: programs neither see it nor call it.
    let code = format!(
        "import * as tools from './servers/{server}';\n\
         export default {{ show: typeof tools.show_dashboard, \
                           refresh: typeof tools.refresh_dashboard }};"
    );
    let ran = client.call("execute_code", json!({"code": code}));
    let value = result_json(ran["content"][0]["text"].as_str().unwrap());
    assert_eq!(
        value,
        json!({"show": "function", "refresh": "undefined"}),
        "{era:?}: {ran}"
    );
}

#[test]
fn a_ui_resource_reaches_clients_of_both_revisions_over_stdio_and_http_upstream() {
    let http = Background::test_server("http", &["--mode", "apps"]);
    let config = config_of(&[
        test_server_table("app", &["--mode", "apps"], "expose = \"both\""),
        format!(
            "[servers.web]\nurl = \"http://127.0.0.1:{}/mcp\"\nexpose = \"both\"\n",
            http.port
        ),
    ]);
    for era in [Era::Initialize, Era::Stateless] {
        let mut client = Client::start(&config, era);
        sees_the_app(&mut client, "app");
        sees_the_app(&mut client, "web");
    }
}

#[test]
fn an_empty_prefix_direct_server_shows_its_uris_as_they_are() {
    // The server speaks 2025-11-25: Runbyte subscribes downstream with resources/subscribe,
    // which 2026-07-28 servers do not take.
    let config = config_of(&[test_server_table(
        "fixture",
        &["--mode", "apps", "--max-protocol-version", "2025-11-25"],
        "expose = \"direct\"\ndirect-prefix = \"\"",
    )]);
    for era in [Era::Initialize, Era::Stateless] {
        let mut client = Client::start(&config, era);
        let tools = client.tools();
        let show = named(&tools, "name", "show_dashboard")
            .unwrap_or_else(|| panic!("{era:?}: {tools:#?}"));
        assert_eq!(
            show["_meta"]["ui"]["resourceUri"],
            "ui://dashboard/main.html"
        );
        let resources = client.resources();
        let uris: Vec<&str> = resources
            .iter()
            .map(|r| r["uri"].as_str().unwrap())
            .collect();
        assert_eq!(
            uris,
            ["ui://dashboard/main.html", "test://apps/readme.txt"],
            "{era:?}"
        );
        assert_eq!(client.templates(), ["ui://dashboard/{view}"], "{era:?}");
        let readme = client.read("test://apps/readme.txt");
        assert_eq!(readme["uri"], "test://apps/readme.txt", "{readme}");
        assert_eq!(readme["text"], "the dashboard shows the weather");
        let page = client.read("ui://dashboard/main.html");
        assert_eq!(page["uri"], "ui://dashboard/main.html");
        assert_eq!(page["mimeType"], MIME);
        let called = client.call("show_dashboard", json!({}));
        assert_eq!(called["content"][1]["uri"], "ui://dashboard/main.html");
        assert_eq!(
            called["content"][2]["resource"]["uri"],
            "test://apps/readme.txt"
        );
        // Runbyte's own URIs are not the server's: a runbyte:// URI is its URI as it is, and
        // this server has none such.
        let namespaced = client.ask(
            "resources/read",
            json!({"uri": "runbyte://fixture/test://apps/readme.txt"}),
        );
        assert_eq!(namespaced["error"]["code"], -32602, "{namespaced}");
        // Subscribed to by its own URI: resources/subscribe in the legacy revision; a listen
        // naming a URI no server gives ends with -32602 (one it gives would be held open).
        match era {
            Era::Initialize => {
                client.result(
                    "resources/subscribe",
                    json!({"uri": "test://apps/readme.txt"}),
                );
                client.result(
                    "resources/unsubscribe",
                    json!({"uri": "test://apps/readme.txt"}),
                );
            }
            Era::Stateless => {
                let refused = client.ask(
                    "subscriptions/listen",
                    json!({"notifications": {"resourceSubscriptions": ["test://nowhere"]}}),
                );
                assert_eq!(refused["error"]["code"], -32602, "{refused}");
            }
        }
    }
}

#[test]
fn a_uri_two_verbatim_servers_share_stands_for_neither() {
    let verbatim = "expose = \"direct\"\ndirect-prefix = \"\"";
    let config = config_of(&[
        test_server_table("a", &["--mode", "apps"], verbatim),
        test_server_table("b", &["--mode", "apps"], verbatim),
        test_server_table("c", &["--mode", "apps"], ""),
    ]);
    let mut client = Client::start(&config, Era::Stateless);
    let resources = client.resources();
    let uris: Vec<&str> = resources
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    // a's and b's URIs meet: listed for neither. c's are namespaced and stay.
    assert_eq!(
        uris,
        [
            "ui://c/dashboard/main.html",
            "runbyte://c/test://apps/readme.txt"
        ],
        "{resources:#?}"
    );
    assert_eq!(client.templates(), ["ui://c/dashboard/{view}"]);
    let shared = client.ask("resources/read", json!({"uri": "test://apps/readme.txt"}));
    let message = shared["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(shared["error"]["code"], -32602, "{shared}");
    assert!(
        message.contains("`a` and `b`"),
        "the refusal names both servers: {shared}"
    );
    // A URI naming c may also be a verbatim server's as it is: c lists it, so it is c's.
    let page = client.read("ui://c/dashboard/main.html");
    assert_eq!(page["uri"], "ui://c/dashboard/main.html");
    assert_eq!(page["mimeType"], MIME);
    // The tools they share a name for are left out too (the names' rule).
    let tools = client.tools();
    assert!(
        named(&tools, "name", "show_dashboard").is_none(),
        "{tools:#?}"
    );
}
