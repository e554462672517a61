#![allow(clippy::unwrap_used)]

use clap::Parser as _;

use super::{Cli, Mode, Settings, Transport};

fn settings(args: &[&str]) -> anyhow::Result<Settings> {
    let argv = std::iter::once("runbyte-test-server").chain(args.iter().copied());
    Settings::try_from(Cli::try_parse_from(argv)?)
}

#[test]
fn no_flags_serve_normal_tools_on_stdio() {
    let settings = settings(&[]).unwrap();
    assert_eq!(settings.transport, Transport::Stdio);
    assert!(settings.modes.is_empty());
    assert_eq!(settings.extra_tools, 0);
    assert_eq!(settings.page_size, 0);
    assert!(settings.start_delay.is_zero());
    assert_eq!(settings.mode_names(), "normal");
}

#[test]
fn modes_repeat_and_split_on_commas() {
    let settings = settings(&[
        "--mode",
        "odd-names,hang-on-list",
        "--mode",
        "complex-schemas",
    ])
    .unwrap();
    assert!(settings.has(Mode::OddNames));
    assert!(settings.has(Mode::HangOnList));
    assert!(settings.has(Mode::ComplexSchemas));
    assert_eq!(
        settings.mode_names(),
        "odd-names,hang-on-list,complex-schemas"
    );
}

#[test]
fn tools_flag_implies_many_tools_and_the_mode_alone_serves_a_hundred() {
    let with_count = settings(&["--tools", "7"]).unwrap();
    assert!(with_count.has(Mode::ManyTools));
    assert_eq!(with_count.extra_tools, 7);
    assert_eq!(
        settings(&["--mode", "many-tools"]).unwrap().extra_tools,
        100
    );
}

#[test]
fn start_delay_implies_slow_start_and_the_mode_alone_waits_a_second() {
    let with_delay = settings(&["--start-delay-ms", "250"]).unwrap();
    assert!(with_delay.has(Mode::SlowStart));
    assert_eq!(with_delay.start_delay.as_millis(), 250);
    assert_eq!(
        settings(&["--mode", "slow-start"])
            .unwrap()
            .start_delay
            .as_millis(),
        1000
    );
}

#[test]
fn flags_for_another_transport_are_refused_by_name() {
    let garbage = settings(&["--transport", "http", "--mode", "garbage-stdout"]).unwrap_err();
    assert!(garbage.to_string().contains("garbage-stdout"), "{garbage}");
    let token = settings(&["--auth-token", "t"]).unwrap_err();
    assert!(token.to_string().contains("--auth-token"), "{token}");
    let stateless = settings(&["--transport", "sse", "--stateless"]).unwrap_err();
    assert!(stateless.to_string().contains("--stateless"), "{stateless}");
    assert!(settings(&["--sse-absolute-endpoint"]).is_err());
}

#[test]
fn json_response_implies_stateless() {
    let settings = settings(&["--transport", "http", "--json-response"]).unwrap();
    assert!(settings.stateless);
}

#[test]
fn an_unknown_protocol_version_is_refused_with_the_known_ones() {
    let error = settings(&["--max-protocol-version", "1999-01-01"])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("1999-01-01") && error.contains("2024-11-05"),
        "{error}"
    );
    let pinned = settings(&["--max-protocol-version", "2025-03-26"]).unwrap();
    assert_eq!(pinned.max_protocol_version.unwrap().as_str(), "2025-03-26");
}

#[test]
fn an_unknown_mode_is_a_usage_error() {
    assert!(settings(&["--mode", "explode"]).is_err());
}
