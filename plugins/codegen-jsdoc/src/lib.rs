//! `jsdoc`: a codegen dialect. Generation arrives with the virtual filesystem; until then it
//! loads, answers its descriptor, and refuses requests.

use runbyte_plugin_api::{codegen::Codegen, export_plugin};

/// The `jsdoc` dialect.
pub struct Dialect;

impl Codegen for Dialect {
    fn open(_config: &str) -> Result<Self, String> {
        Ok(Dialect)
    }

    fn generate(&self, _request: &str) -> Result<String, String> {
        Err("the jsdoc dialect does not generate files yet".to_owned())
    }
}

export_plugin! { kind: codegen, name: "jsdoc", plugin: Dialect }
