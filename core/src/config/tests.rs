#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::{Config, ConfigError, Share, check_endpoint, expand::expand};

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(
        text,
        Path::new("/etc/runbyte/runbyte.toml"),
        Path::new("/etc/runbyte"),
    )
}

fn error(text: &str) -> ConfigError {
    parse(text).err().unwrap()
}

#[test]
fn the_default_configuration_parses() {
    let config = parse(super::DEFAULT_CONFIG).unwrap();
    assert_eq!(config.server.listen, "stdio");
    assert_eq!(config.codegen.dialect, "typescript");
    assert_eq!(config.sandbox.policy.names(), ["limits"]);
    assert_eq!(config.policy_table("limits")["timeout-ms"], 30000);
    let demo = &config.servers["demo"];
    assert_eq!(demo.args, ["demo-server"]);
    assert_eq!(demo.connector(), ("stdio", false));
    assert!(!demo.command.as_deref().unwrap().contains("${"));
    assert_eq!(
        config.plugins.dirs,
        [Path::new("/etc/runbyte/target/release")]
    );
}

#[test]
fn an_unknown_key_names_the_file_line_and_key() {
    let e = error("[servers.demo]\ncommand = \"x\"\ncomand = \"y\"\n");
    assert_eq!(e.file, Path::new("/etc/runbyte/runbyte.toml"));
    assert_eq!(e.position.map(|p| p.0), Some(3));
    assert_eq!(e.key.as_deref(), Some("servers.demo.comand"));
    assert!(e.message.contains("unknown field `comand`"), "{e}");
    assert!(
        e.to_string().starts_with("/etc/runbyte/runbyte.toml:3:"),
        "{e}"
    );

    let e = error("[sever]\nlisten = \"http\"\n");
    assert_eq!(e.key.as_deref(), Some("sever"));
    assert!(e.message.contains("unknown field `sever`"), "{e}");
}

#[test]
fn a_wrong_type_names_the_key() {
    let e = error("[servers.demo]\ncommand = \"x\"\nargs = \"not a list\"\n");
    assert_eq!(e.position.map(|p| p.0), Some(3));
    assert_eq!(e.key.as_deref(), Some("servers.demo.args"));
    assert!(e.message.contains("invalid type"), "{e}");
}

#[test]
fn variables_expand_with_defaults_and_a_missing_one_is_named() {
    // SAFETY: no other test reads these variables.
    unsafe {
        std::env::set_var("RUNBYTE_TEST_TOKEN", "s3cret");
        std::env::remove_var("RUNBYTE_TEST_MISSING");
    }
    let config = parse(
        "[servers.gh]\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer ${RUNBYTE_TEST_TOKEN}\", X = \"${RUNBYTE_TEST_MISSING:-none}\" }\n",
    )
    .unwrap();
    let headers = &config.servers["gh"].headers;
    assert_eq!(headers["Authorization"], "Bearer s3cret");
    assert_eq!(headers["X"], "none");
    assert_eq!(config.servers["gh"].connector(), ("http", true));

    let e = error(
        "[servers.gh]\nurl = \"https://example.com\"\n\nheaders = { A = \"${RUNBYTE_TEST_MISSING}\" }\n",
    );
    assert_eq!(e.position.map(|p| p.0), Some(4));
    assert_eq!(e.key.as_deref(), Some("servers.gh.headers.A"));
    assert!(
        e.message.contains("`RUNBYTE_TEST_MISSING` is not set"),
        "{e}"
    );
}

#[test]
fn expansion_rules() {
    let lookup = |name: &str| (name == "A").then(|| "a".to_owned());
    assert_eq!(expand("x${A}y", &lookup).unwrap(), "xay");
    assert_eq!(expand("${B:-dflt}", &lookup).unwrap(), "dflt");
    assert_eq!(expand("$${A} costs $5", &lookup).unwrap(), "${A} costs $5");
    assert!(expand("${A", &lookup).unwrap_err().contains("closing"));
    assert!(
        expand("${1x}", &lookup)
            .unwrap_err()
            .contains("not a variable reference")
    );
}

#[test]
fn a_server_needs_exactly_one_of_command_and_url() {
    let e = error("[servers.both]\ncommand = \"x\"\nurl = \"http://h\"\n");
    assert_eq!(e.key.as_deref(), Some("servers.both"));
    assert!(e.message.contains("not both"), "{e}");
    let e = error("[servers.none]\nargs = []\n");
    assert!(e.message.contains("needs `command`"), "{e}");
    let e = error("[servers.bad]\nurl = \"ftp://h\"\n");
    assert_eq!(e.key.as_deref(), Some("servers.bad.url"));
}

#[test]
fn relative_paths_resolve_against_the_files_folder() {
    let config = parse(
        "[plugins]\ndirs = [\"plugins\", \"/abs\"]\n[servers.local]\ncommand = \"./bin/server\"\ncwd = \"work\"\nshare = \"session\"\n[servers.path]\ncommand = \"npx\"\n",
    )
    .unwrap();
    assert_eq!(
        config.plugins.dirs,
        [Path::new("/etc/runbyte/plugins"), Path::new("/abs")]
    );
    // Joined as paths are on this OS (`\` on Windows).
    let command = Path::new("/etc/runbyte").join("./bin/server");
    assert_eq!(config.servers["local"].command.as_deref(), command.to_str());
    assert_eq!(
        config.servers["local"].cwd.as_deref(),
        Some(Path::new("/etc/runbyte/work"))
    );
    assert_eq!(config.servers["local"].share, Share::Session);
    assert_eq!(config.servers["path"].command.as_deref(), Some("npx"));
}

#[test]
fn a_policy_table_needs_its_policy() {
    let e = error("[sandbox]\npolicy = \"limits\"\n[sandbox.readonly]\nallow = []\n");
    assert_eq!(e.key.as_deref(), Some("sandbox.readonly"));
    assert!(e.message.contains("no policy named `readonly`"), "{e}");
    let config = parse("[sandbox]\npolicy = [\"limits\", \"readonly\"]\n[sandbox.readonly]\nallow = [\"demo/*\"]\n").unwrap();
    assert_eq!(config.policy_table("readonly")["allow"][0], "demo/*");
}

#[test]
fn an_include_reads_mcp_servers_in_place_and_a_bad_one_is_named() {
    let dir = std::env::temp_dir().join(format!("runbyte-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("claude.json"),
        r#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]},
            "remote": {"url": "https://example.com/mcp", "type": "sse"}}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("broken.json"), "{ not json").unwrap();
    let file = dir.join("runbyte.toml");
    let config = Config::parse("[servers]\ninclude = \"claude.json\"\n", &file, &dir).unwrap();
    assert_eq!(
        config.servers["files"].args,
        ["-y", "server-filesystem", "/tmp"]
    );
    assert_eq!(config.servers["remote"].transport.as_deref(), Some("sse"));

    let e = Config::parse("[servers]\ninclude = \"broken.json\"\n", &file, &dir)
        .err()
        .unwrap();
    assert_eq!(e.key.as_deref(), Some("servers.include"));
    assert_eq!(e.position.map(|p| p.0), Some(2));
    assert!(
        e.message.contains("broken.json") && e.message.contains("not valid JSON"),
        "{e}"
    );

    let e = Config::parse("[servers]\ninclude = \"absent.json\"\n", &file, &dir)
        .err()
        .unwrap();
    assert!(
        e.message.contains("cannot read") && e.message.contains("absent.json"),
        "{e}"
    );

    let e = Config::parse(
        "[servers]\ninclude = \"claude.json\"\n[servers.files]\ncommand = \"x\"\n",
        &file,
        &dir,
    )
    .err()
    .unwrap();
    assert!(
        e.message
            .contains("defines server `files`, which this file defines too"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn import_converts_each_clients_spelling() {
    let imported = super::import_mcp_servers(
        r#"{"servers": {"gh": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            "local": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}, "alwaysAllow": ["x"]}}}"#,
    )
    .unwrap();
    assert_eq!(imported.servers["gh"].transport.as_deref(), Some("http"));
    assert_eq!(
        imported.notes,
        ["server `local`: dropped `alwaysAllow` (Runbyte has no such setting)"]
    );
    let text = super::servers_to_toml(&imported);
    let back = parse(&text).unwrap();
    assert_eq!(back.servers["local"], imported.servers["local"]);
    assert_eq!(back.servers["gh"].headers["Authorization"], "Bearer x");
    assert!(
        super::import_mcp_servers("{}")
            .unwrap_err()
            .contains("no `mcpServers`")
    );
}

#[test]
fn import_carries_oauth_clients_and_unwraps_mcp_remote() {
    let imported = super::import_mcp_servers(
        r#"{"mcpServers": {
            "linear": {"command": "npx", "args": ["-y", "mcp-remote@latest", "https://mcp.linear.app/sse",
                       "--header", "X-Team:${TEAM}", "--transport", "sse-only",
                       "--static-oauth-client-info", "{\"client_id\":\"abc\",\"client_secret\":\"s3cret-x\"}",
                       "--static-oauth-client-metadata", "{\"scope\":\"read write\"}"],
                       "env": {"TEAM": "core"}},
            "docs": {"url": "https://docs.example/mcp", "auth": {"CLIENT_ID": "cid", "scopes": ["docs:read"]}},
            "local": {"command": "uvx", "args": ["mcp-server-time"]}}}"#,
    )
    .unwrap();
    let linear = &imported.servers["linear"];
    assert_eq!(linear.url.as_deref(), Some("https://mcp.linear.app/sse"));
    assert_eq!(linear.command, None);
    assert_eq!(linear.transport.as_deref(), Some("sse"));
    assert_eq!(linear.headers["X-Team"], "core");
    assert_eq!(linear.client_id.as_deref(), Some("abc"));
    assert_eq!(linear.client_secret.as_deref(), Some("s3cret-x"));
    assert_eq!(
        linear.scopes.as_deref(),
        Some(&["read".to_owned(), "write".to_owned()][..])
    );
    assert!(
        imported
            .notes
            .iter()
            .any(|note| note.contains("runbyte login linear"))
    );
    let docs = &imported.servers["docs"];
    assert_eq!(docs.client_id.as_deref(), Some("cid"));
    assert_eq!(docs.scopes.as_deref(), Some(&["docs:read".to_owned()][..]));
    assert_eq!(imported.servers["local"].command.as_deref(), Some("uvx"));
    // What it prints is a valid configuration that reads back the same.
    let back = parse(&super::servers_to_toml(&imported)).unwrap();
    assert_eq!(back.servers["linear"], *linear);
    assert_eq!(back.servers["docs"], *docs);
}

#[test]
fn oauth_settings_that_do_not_fit_are_named() {
    let cases = [
        (
            "[servers.s]\ncommand = \"x\"\nauth = \"oauth\"\n",
            "servers.s.auth",
            "a stdio server takes its credentials in `env`",
        ),
        (
            "[servers.s]\nurl = \"https://h/mcp\"\nclient-secret = \"abcdef\"\n",
            "servers.s.client-secret",
            "needs `client-id`",
        ),
        (
            "[servers.s]\nurl = \"https://h/mcp\"\nauth = \"client-credentials\"\nclient-id = \"c\"\n",
            "servers.s.auth",
            "needs `client-id` and `client-secret`",
        ),
        (
            "[servers.s]\nurl = \"https://h/mcp\"\nclient-metadata-url = \"http://h/c.json\"\n",
            "servers.s.client-metadata-url",
            "must be an https:// URL",
        ),
        (
            "[servers.s]\nurl = \"https://h/mcp\"\nauth = \"none\"\nscopes = [\"a\"]\n",
            "servers.s.scopes",
            "only applies",
        ),
        (
            "[servers.s]\nurl = \"https://h/mcp\"\nauthorization-server = \"as.example\"\n",
            "servers.s.authorization-server",
            "issuer URL",
        ),
        (
            "[servers.s]\ncommand = \"x\"\nauthorization-server = \"https://as.example\"\n",
            "servers.s.authorization-server",
            "only applies",
        ),
    ];
    for (text, key, words) in cases {
        let e = error(text);
        assert_eq!(e.key.as_deref(), Some(key), "{text}: {e}");
        assert!(e.to_string().contains(words), "{text}: {e}");
    }
    let config = parse(
        "[servers.s]\nurl = \"https://h/mcp\"\nauth = \"oauth\"\nclient-id = \"c\"\nscopes = [\"a\", \"b\"]\n\
         authorization-server = \"https://as.example\"\n",
    )
    .unwrap();
    assert_eq!(config.servers["s"].auth, Some(super::Auth::Oauth));
    assert_eq!(
        config.servers["s"].authorization_server.as_deref(),
        Some("https://as.example")
    );
}

#[test]
fn a_state_store_is_a_redis_url_beside_a_shared_key() {
    let config =
        parse("[server]\nstate-key-file = \"k\"\nstate-store = \"redis://cache:6379/2\"\n")
            .unwrap();
    assert_eq!(
        config.server.state_store.as_deref(),
        Some("redis://cache:6379/2")
    );
    let e = error("[server]\nstate-key-file = \"k\"\nstate-store = \"rediss://cache\"\n");
    assert_eq!(e.key.as_deref(), Some("server.state-store"));
    assert_eq!(e.position.map(|p| p.0), Some(3));
    assert!(e.message.contains("TLS"), "{e}");
    let e = error("[server]\nstate-key-file = \"k\"\nstate-store = \"memcached://:pw@cache\"\n");
    assert!(
        e.message.contains("not a redis://") && !e.message.contains("pw@"),
        "{e}"
    );
    let e = error("[server]\nstate-store = \"redis://cache\"\n");
    assert_eq!(e.key.as_deref(), Some("server.state-store"));
    assert!(e.message.contains("needs `state-key-file`"), "{e}");
}

#[test]
fn a_result_cache_names_its_tools_and_a_ttl_within_a_day() {
    use super::ResultScope;

    let config = parse(
        "[servers.a]\ncommand = \"x\"\n[servers.a.cache]\ntools = [\"get_*\"]\n\
         exclude-tools = [\"get_secret\"]\nttl-ms = 60000\nscope = \"shared\"\n",
    )
    .unwrap();
    let cache = config.servers["a"].cache.as_ref().unwrap();
    assert_eq!(cache.scope, ResultScope::Shared);
    assert!(cache.covers("get_weather") && !cache.covers("get_secret") && !cache.covers("set_x"));
    let e = error("[servers.a]\ncommand = \"x\"\n[servers.a.cache]\ntools = [\"*\"]\nttl-ms = 0\n");
    assert_eq!(e.key.as_deref(), Some("servers.a.cache.ttl-ms"), "{e}");
    let e = error(
        "[servers.a]\ncommand = \"x\"\n[servers.a.cache]\ntools = [\"*\"]\nttl-ms = 86400001\n",
    );
    assert!(e.message.contains("a day"), "{e}");
    let e = error("[servers.a]\ncommand = \"x\"\n[servers.a.cache]\ntools = []\nttl-ms = 5\n");
    assert_eq!(e.key.as_deref(), Some("servers.a.cache.tools"), "{e}");
    let e = error("[servers.a]\ncommand = \"x\"\n[servers.a.cache]\ntools = [\"*\"]\n");
    assert!(e.message.contains("ttl-ms"), "{e}");
}

#[test]
fn auto_exposure_is_in_code_and_may_be_direct_within_a_budget() {
    use super::{DEFAULT_DIRECT_BUDGET, Expose};

    let config = parse(
        "[server]\nexpose = \"auto\"\n[servers.a]\ncommand = \"x\"\n\
         [servers.b]\ncommand = \"x\"\nexpose = \"code\"\n",
    )
    .unwrap();
    assert_eq!(config.exposure("a"), Expose::Auto);
    assert!(Expose::Auto.in_code() && Expose::Auto.direct());
    assert_eq!(config.direct_budget(), DEFAULT_DIRECT_BUDGET);
    // Its prefix is checked like any directly exposed server's.
    assert_eq!(config.direct_servers(), [("a".to_owned(), "a_".to_owned())]);
    // The only server, `auto`, lists its tools under their own names, unless it has a prefix.
    let config = parse("[server]\nexpose = \"auto\"\n[servers.a]\ncommand = \"x\"\n").unwrap();
    assert_eq!(config.direct_servers(), [("a".to_owned(), String::new())]);
    let config =
        parse("[servers.a]\ncommand = \"x\"\nexpose = \"auto\"\ndirect-prefix = \"a.\"\n").unwrap();
    assert_eq!(config.direct_servers(), [("a".to_owned(), "a.".to_owned())]);
    let config = parse("[servers.a]\ncommand = \"x\"\nexpose = \"direct\"\n").unwrap();
    assert_eq!(config.direct_servers(), [("a".to_owned(), "a_".to_owned())]);
    let config = parse("[server]\ndirect-budget = 1200\n").unwrap();
    assert_eq!(config.direct_budget(), 1200);
    let e = error("[server]\ndirect-budget = -1\n");
    assert_eq!(e.key.as_deref(), Some("server.direct-budget"), "{e}");
    let e = error("[servers.a]\ncommand = \"x\"\nexpose = \"sometimes\"\n");
    assert!(e.message.contains("auto"), "{e}");
}

#[test]
fn directly_exposed_servers_need_prefixes_that_keep_their_tools_apart() {
    use super::Expose;

    let config = parse(
        "[server]\nexpose = \"both\"\n[servers.a]\ncommand = \"x\"\n\
         [servers.b]\ncommand = \"x\"\nexpose = \"code\"\n\
         [servers.c]\ncommand = \"x\"\nexpose = \"direct\"\ndirect-prefix = \"c.\"\n",
    )
    .unwrap();
    assert_eq!(config.exposure("a"), Expose::Both);
    assert_eq!(config.exposure("b"), Expose::Code);
    assert_eq!(
        config.direct_servers(),
        [
            ("a".to_owned(), "a_".to_owned()),
            ("c".to_owned(), "c.".to_owned())
        ]
    );
    let e = error(
        "[servers.a]\ncommand = \"x\"\nexpose = \"direct\"\n\
         [servers.a_b]\ncommand = \"x\"\nexpose = \"direct\"\n",
    );
    assert!(
        e.message.contains("overlaps server") && e.message.contains("a_"),
        "{e}"
    );
    // An empty prefix (a transparent gateway) overlaps no other: names two servers would share
    // are left out when listed.
    let config = parse(
        "[servers.a]\ncommand = \"x\"\nexpose = \"direct\"\ndirect-prefix = \"\"\n\
         [servers.b]\ncommand = \"x\"\nexpose = \"direct\"\ndirect-prefix = \"\"\n\
         [servers.c]\ncommand = \"x\"\nexpose = \"direct\"\n",
    )
    .unwrap();
    assert_eq!(config.direct_servers().len(), 3);
    // A server exposed to programs only needs no prefix.
    parse("[servers.a]\ncommand = \"x\"\ndirect-prefix = \"\"\n").unwrap();
}

#[test]
fn telemetry_is_off_unless_asked_and_its_keys_are_checked() {
    let config = parse(super::DEFAULT_CONFIG).unwrap();
    assert!(config.telemetry.otlp_endpoint.is_none());
    assert!(!config.telemetry.metrics);

    let config = parse(
        "[telemetry]\notlp-endpoint = \"http://127.0.0.1:4318\"\nservice-name = \"gw\"\nmetrics = true\n",
    )
    .unwrap();
    assert_eq!(
        config.telemetry.otlp_endpoint.as_deref(),
        Some("http://127.0.0.1:4318")
    );
    assert_eq!(config.telemetry.service_name.as_deref(), Some("gw"));
    assert!(config.telemetry.metrics);

    let e = error("[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n");
    assert_eq!(e.key.as_deref(), Some("telemetry.endpoint"));
    assert!(e.message.contains("unknown field `endpoint`"), "{e}");

    let e = error("[telemetry]\notlp-endpoint = \"127.0.0.1:4318\"\n");
    assert_eq!(e.key.as_deref(), Some("telemetry.otlp-endpoint"));
    assert_eq!(e.position.map(|p| p.0), Some(2));
    assert!(e.message.contains("not an http:// URL"), "{e}");

    let e = error("[telemetry]\nservice-name = \" \"\n");
    assert_eq!(e.key.as_deref(), Some("telemetry.service-name"));

    let e = error("[telemetry]\nmetrics = \"yes\"\n");
    assert_eq!(e.key.as_deref(), Some("telemetry.metrics"));
}

#[test]
fn only_http_base_urls_are_collectors() {
    assert!(check_endpoint("http://127.0.0.1:4318").is_ok());
    assert!(check_endpoint("http://collector:4318/otlp/").is_ok());
    let https = check_endpoint("https://collector:4318").unwrap_err();
    assert!(https.contains("only http://"), "{https}");
    for bad in [
        "collector:4318",
        "http://",
        "http://host:4318/?x=1",
        "http://a b",
    ] {
        assert!(check_endpoint(bad).is_err(), "{bad}");
    }
}
