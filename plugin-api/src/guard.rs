//! The wall every entry point of a plugin sits behind: a panic becomes an error naming the
//! plugin, an error string an error of kind `Failed`. The export macro's root module and the
//! three kinds' adapters all use it, so it sits below them.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::PluginError;

/// Runs one plugin entry point, turning a panic into [`PluginError`] and an error string into a
/// [`PluginError`] of kind `Failed`.
pub(crate) fn guard<T>(
    plugin: &str,
    entry: &str,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<T, PluginError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(message)) => Err(PluginError::failed(message)),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_owned());
            Err(PluginError::panicked(format!(
                "plugin `{plugin}` panicked in `{entry}`: {what}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_a_panic_into_an_error_naming_the_plugin() {
        let error = guard::<()>("demo", "limits", || panic!("boom")).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Panicked);
        assert_eq!(
            error.message.as_str(),
            "plugin `demo` panicked in `limits`: boom"
        );
        let error = guard::<()>("demo", "limits", || Err("bad key".into())).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Failed);
    }
}
