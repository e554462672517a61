use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{RResult, RStr},
};

use crate::{
    HostApiRef, PluginError, PluginKind, codegen::RawCodegenBox, policy::RawPolicyBox,
    transport::RawTransportBox,
};

/// A plugin's identity, as its root module reports it. It must agree with the
/// [`RawDescriptor`](crate::RawDescriptor) the host read first.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct PluginDescriptor {
    /// What the plugin provides.
    pub kind: PluginKind,
    /// The plugin's name: what `runbyte.toml` refers to it by.
    pub name: RStr<'static>,
    /// The plugin's own version (its crate version by default).
    pub version: RStr<'static>,
    /// The [`PLUGIN_API_VERSION`](crate::PLUGIN_API_VERSION) it was built against.
    pub api_version: u32,
}

/// An opened plugin: one trait object of the plugin's kind.
#[repr(u8)]
#[derive(StableAbi)]
pub enum PluginInstance {
    /// A transport's connector and listener.
    Transport(RawTransportBox),
    /// A codegen dialect.
    Codegen(RawCodegenBox),
    /// A sandbox policy.
    Policy(RawPolicyBox),
}

impl PluginInstance {
    /// The kind of plugin this instance is.
    pub fn kind(&self) -> PluginKind {
        match self {
            PluginInstance::Transport(_) => PluginKind::Transport,
            PluginInstance::Codegen(_) => PluginKind::Codegen,
            PluginInstance::Policy(_) => PluginKind::Policy,
        }
    }
}

/// The root module every plugin exports. Append-only: fields after the last prefix field are
/// optional to a host that knows them and invisible to one that does not.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
pub struct PluginModule {
    /// The plugin's identity. Never fails, never blocks.
    pub descriptor: extern "C" fn() -> PluginDescriptor,
    /// Opens the plugin with its configuration table from `runbyte.toml`, as a JSON object
    /// (`{}` when the file has none). The host calls it once per plugin and keeps the instance
    /// for its lifetime. An error is a configuration the plugin refuses; the host reports it
    /// with the plugin's name and stops at start-up.
    #[sabi(last_prefix_field)]
    pub open:
        extern "C" fn(config: RStr<'_>, host: HostApiRef) -> RResult<PluginInstance, PluginError>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}

    const BASE_NAME: &'static str = "runbyte_plugin";
    const NAME: &'static str = "runbyte_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
