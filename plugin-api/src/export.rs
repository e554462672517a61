//! What [`export_plugin!`](crate::export_plugin) expands to. Not for direct use.

use abi_stable::{
    prefix_type::PrefixTypeTrait,
    sabi_trait::TD_Opaque,
    std_types::{RResult, RStr},
};

use crate::{
    HostApiRef, PLUGIN_API_VERSION, PluginDescriptor, PluginError, PluginInstance, PluginKind,
    PluginModule, PluginModuleRef,
    codegen::{Codegen, CodegenAdapter, RawCodegen_TO},
    guard::guard,
    host,
    policy::{Policy, PolicyAdapter, RawPolicy_TO},
    transport::{RawTransport_TO, Transport, TransportAdapter},
};

/// The name abi_stable's `#[export_root_module]` gives the library header static; written out
/// here so that a plugin crate need not depend on abi_stable itself. A test checks it against
/// `abi_stable::library::ROOT_MODULE_LOADER_NAME`.
pub const ROOT_MODULE_LOADER_NAME: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Implemented by `export_plugin!` for the exported type.
pub trait Exported: Sized + 'static {
    const KIND: PluginKind;
    const NAME: &'static str;
    const VERSION: &'static str;
    fn open_instance(config: &str) -> Result<PluginInstance, String>;
}

pub fn transport_instance<T: Transport>(
    config: &str,
    plugin: &'static str,
) -> Result<PluginInstance, String> {
    let inner = T::open(config)?;
    Ok(PluginInstance::Transport(RawTransport_TO::from_value(
        TransportAdapter { inner, plugin },
        TD_Opaque,
    )))
}

pub fn codegen_instance<T: Codegen>(
    config: &str,
    plugin: &'static str,
) -> Result<PluginInstance, String> {
    let inner = T::open(config)?;
    Ok(PluginInstance::Codegen(RawCodegen_TO::from_value(
        CodegenAdapter { inner, plugin },
        TD_Opaque,
    )))
}

pub fn policy_instance<T: Policy>(
    config: &str,
    plugin: &'static str,
) -> Result<PluginInstance, String> {
    let inner = T::open(config)?;
    Ok(PluginInstance::Policy(RawPolicy_TO::from_value(
        PolicyAdapter { inner, plugin },
        TD_Opaque,
    )))
}

extern "C" fn descriptor<T: Exported>() -> PluginDescriptor {
    PluginDescriptor {
        kind: T::KIND,
        name: RStr::from_str(T::NAME),
        version: RStr::from_str(T::VERSION),
        api_version: PLUGIN_API_VERSION,
    }
}

extern "C" fn open<T: Exported>(
    config: RStr<'_>,
    host_api: HostApiRef,
) -> RResult<PluginInstance, PluginError> {
    host::install(host_api, T::NAME);
    guard(T::NAME, "open", || T::open_instance(config.as_str())).into()
}

/// The root module for `T`.
pub fn root_module<T: Exported>() -> PluginModuleRef {
    PluginModule {
        descriptor: descriptor::<T>,
        open: open::<T>,
    }
    .leak_into_prefix()
}

/// Exports a type as a Runbyte plugin. Use it once, at the crate root of a `cdylib`.
///
/// ```ignore
/// runbyte_plugin_api::export_plugin! { kind: policy, name: "readonly", plugin: ReadOnly }
/// ```
///
/// - `kind`: `transport`, `codegen` or `policy`; the type implements
///   [`Transport`](crate::transport::Transport), [`Codegen`](crate::codegen::Codegen) or
///   [`Policy`](crate::policy::Policy) accordingly.
/// - `name`: what `runbyte.toml` calls the plugin. Found by name, the library file must be
///   called `librunbyte_<kind>_<name>.so` (`-` in the name becomes `_`), which is what a crate
///   named `runbyte-<kind>-<name>` builds; loaded by path, the file name is free.
/// - `version` (optional): the plugin's version; the crate's version by default.
///
/// It exports the [`RawDescriptor`](crate::RawDescriptor) the host reads first and the
/// abi_stable root module, with every entry point wrapped so that a panic becomes an error
/// naming the plugin.
#[macro_export]
macro_rules! export_plugin {
    (kind: $kind:ident, name: $name:literal, plugin: $ty:ty $(,)?) => {
        $crate::export_plugin! {
            kind: $kind, name: $name, plugin: $ty, version: env!("CARGO_PKG_VERSION")
        }
    };
    (kind: $kind:ident, name: $name:literal, plugin: $ty:ty, version: $version:expr $(,)?) => {
        impl $crate::export::Exported for $ty {
            const KIND: $crate::PluginKind = $crate::__plugin_kind!($kind);
            const NAME: &'static str = $name;
            const VERSION: &'static str = $version;
            fn open_instance(config: &str) -> ::std::result::Result<$crate::PluginInstance, String> {
                $crate::__plugin_instance!($kind, $ty, config, $name)
            }
        }

        #[unsafe(no_mangle)]
        pub static RUNBYTE_PLUGIN_DESCRIPTOR: $crate::RawDescriptor = $crate::RawDescriptor::new(
            $crate::__plugin_kind!($kind),
            concat!($name, "\0"),
            concat!($version, "\0"),
        );

        #[allow(non_upper_case_globals)]
        #[unsafe(no_mangle)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi_stable::library::LibHeader = {
            extern "C" fn erased() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader(
                    $crate::export::root_module::<$ty>,
                )
            }
            // SAFETY: `erased` returns the root module of type `PluginModuleRef`, which is the
            // type the header is built for; abi_stable checks its layout at load.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::PluginModuleRef>(
                    erased,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __plugin_kind {
    (transport) => {
        $crate::PluginKind::Transport
    };
    (codegen) => {
        $crate::PluginKind::Codegen
    };
    (policy) => {
        $crate::PluginKind::Policy
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __plugin_instance {
    (transport, $ty:ty, $config:expr, $name:literal) => {
        $crate::export::transport_instance::<$ty>($config, $name)
    };
    (codegen, $ty:ty, $config:expr, $name:literal) => {
        $crate::export::codegen_instance::<$ty>($config, $name)
    };
    (policy, $ty:ty, $config:expr, $name:literal) => {
        $crate::export::policy_instance::<$ty>($config, $name)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_static_has_abi_stables_name() {
        assert_eq!(
            ROOT_MODULE_LOADER_NAME,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
