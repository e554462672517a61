//! Generating one server's modules: `cargo bench -p runbyte-codegen-typescript`.
#![allow(clippy::unwrap_used)]

#[path = "../../codegen-common/testing/invariants.rs"]
mod invariants;

use runbyte_codegen_typescript::TypeScript;
use runbyte_plugin_api::codegen::Codegen;

fn main() {
    divan::main();
}

/// 1,000 tools synthesised from the recorded real servers' tool lists.
#[divan::bench(args = [100, 1000])]
fn realistic_tools(bencher: divan::Bencher, tools: usize) {
    let request = invariants::synthetic_server(tools);
    bencher.bench(|| TypeScript.generate(divan::black_box(&request)).unwrap());
}
