//! Which names the server answers to. A web page in the user's browser can
//! point a name it controls at 127.0.0.1 (DNS rebinding) and read the
//! server's answers as its own; such requests carry that name in `Host`.
//! As Jupyter and webpack-dev-server do, only these are answered:
//! `localhost` and names under `.localhost` (which browsers resolve to
//! loopback themselves), loopback addresses, the address the server is
//! bound to (any address when bound to all), and the names allowed with
//! `--allow-host` (`*` allows every name). Everything else gets 403 and one
//! line saying why and what to do.

use crate::responses::refuse;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::net::IpAddr;
use std::sync::Arc;

/// The names and addresses requests may carry in `Host`.
#[derive(Clone, Debug)]
pub struct AllowedHosts {
    bound: IpAddr,
    /// Lower case, without a trailing dot.
    names: Vec<String>,
    any: bool,
}

impl AllowedHosts {
    /// Loopback names, `bound` and `extra` (names, or `*` for any).
    pub fn new(bound: IpAddr, extra: &[String]) -> AllowedHosts {
        AllowedHosts {
            bound,
            names: extra.iter().map(|name| normalized(name)).collect(),
            any: extra.iter().any(|name| name == "*"),
        }
    }

    /// True if a request whose `Host` is `host` (with or without a port)
    /// may be answered.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let name = normalized(without_port(host));
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        if let Ok(address) = name.parse::<IpAddr>() {
            return address.is_loopback() || address == self.bound || self.bound.is_unspecified();
        }
        self.names.contains(&name)
    }
}

/// `name:port` → `name`, `[::1]:port` → `::1` (a bare IPv6 address has
/// no port).
fn without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(address, _)| address);
    }
    if host.matches(':').count() > 1 {
        return host;
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn normalized(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The middleware: a request without an allowed `Host` (or with another
/// name in an absolute URL) is refused before any route sees it.
pub async fn check_host(
    State(allowed): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .uri()
        .authority()
        .map(|authority| authority.as_str().to_string())
        .or_else(|| {
            let value = request.headers().get(header::HOST)?;
            Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
        });
    match host {
        None => refuse(StatusCode::BAD_REQUEST, "no Host header"),
        Some(host) if allowed.allows(&host) => next.run(request).await,
        Some(host) => {
            let shown: String = host.chars().take(100).collect();
            refuse(
                StatusCode::FORBIDDEN,
                &format!(
                    "heapdiff serve does not answer to the name {shown:?} (a web page rebinding a name to this machine?): it answers to localhost and the address it listens on; --allow-host NAME adds a name"
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_the_bound_address_only() {
        let loopback = AllowedHosts::new("127.0.0.1".parse().unwrap(), &[]);
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "viewer.localhost:1",
            "127.0.0.1:8080",
            "127.1.2.3",
            "[::1]:8080",
            "::1",
        ] {
            assert!(loopback.allows(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "192.168.1.5:8080",
            "",
            "[::ffff:1.2.3.4]",
        ] {
            assert!(!loopback.allows(host), "{host}");
        }
        let lan = AllowedHosts::new("192.168.1.5".parse().unwrap(), &["Box.lan".into()]);
        assert!(lan.allows("192.168.1.5:8080"));
        assert!(lan.allows("box.lan:8080"));
        assert!(!lan.allows("192.168.1.6"));
        let all = AllowedHosts::new("0.0.0.0".parse().unwrap(), &[]);
        assert!(all.allows("10.0.0.7:8080"), "any address when bound to all");
        assert!(!all.allows("evil.example"));
        assert!(AllowedHosts::new("127.0.0.1".parse().unwrap(), &["*".into()]).allows("x.y"));
    }
}
