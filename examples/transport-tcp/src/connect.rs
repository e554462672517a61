//! The connector: a downstream server at `tcp://host:port`.

use std::{
    io::BufReader,
    net::{SocketAddr, TcpStream, ToSocketAddrs},
    time::Duration,
};

use runbyte_plugin_api::{LogLevel, log};
use serde::Deserialize;

use crate::{
    Config, WRITE_TIMEOUT,
    pump::{LinePump, Side},
};

/// The host's description of the server: its name and `url`. The other keys of the server's
/// table (`command`, `headers`, ...) mean nothing to this transport and are ignored.
#[derive(Debug, Deserialize)]
struct Target {
    name: String,
    url: Option<String>,
}

/// The socket addresses `url` names. Only `tcp://host:port` is accepted: no path, no query, no
/// user; `host` may be a name, an IPv4 address or a bracketed IPv6 address.
pub(crate) fn parse_url(url: &str) -> Result<Vec<SocketAddr>, String> {
    let bad = |why: &str| format!("`{url}` is not a tcp://host:port URL: {why}");
    let rest = url
        .strip_prefix("tcp://")
        .ok_or_else(|| bad("it must start with tcp://"))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#', '@']) || authority.is_empty() {
        return Err(bad("only a host and a port may follow tcp://"));
    }
    let port_ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !port_ok {
        return Err(bad(
            "it needs a host and a port, as in tcp://127.0.0.1:7000",
        ));
    }
    let addresses: Vec<SocketAddr> = authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{url}`: {e}"))?
        .collect();
    if addresses.is_empty() {
        return Err(format!("`{url}` resolves to no address"));
    }
    Ok(addresses)
}

pub(crate) fn connect(target: &str, config: &Config) -> Result<LinePump, String> {
    let target: Target =
        serde_json::from_str(target).map_err(|e| format!("bad tcp target: {e}"))?;
    let name = &target.name;
    let url = target.url.as_deref().ok_or_else(|| {
        format!("server `{name}`: the tcp transport needs `url = \"tcp://host:port\"`")
    })?;
    let addresses = parse_url(url).map_err(|e| format!("server `{name}`: {e}"))?;
    let timeout = Duration::from_millis(config.connect_timeout_ms);
    let mut failures = Vec::new();
    let stream = addresses
        .iter()
        .find_map(
            |address| match TcpStream::connect_timeout(address, timeout) {
                Ok(stream) => Some(stream),
                Err(e) => {
                    failures.push(format!("{address}: {e}"));
                    None
                }
            },
        )
        .ok_or_else(|| {
            format!(
                "server `{name}`: cannot connect to {url} ({})",
                failures.join("; ")
            )
        })?;
    let setup = |stream: &TcpStream| -> std::io::Result<BufReader<TcpStream>> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        Ok(BufReader::with_capacity(64 * 1024, stream.try_clone()?))
    };
    let reader = setup(&stream).map_err(|e| format!("server `{name}`: {url}: {e}"))?;
    let label = format!("server `{name}` ({url})");
    log(LogLevel::Debug, &format!("connected to {label}"));
    let pump = LinePump::start(
        stream,
        reader,
        label,
        Side::Client,
        config.max_line_bytes,
        None,
        || {},
    )?;
    if let Some(token) = config.auth_tokens.get(name) {
        use runbyte_plugin_api::transport::Pump;
        pump.send(&serde_json::json!({ "auth": token }).to_string())?;
    }
    Ok(pump)
}
