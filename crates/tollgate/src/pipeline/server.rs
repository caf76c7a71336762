//! Where a model's calls go, as the OpenTelemetry conventions name it (`server.address`,
//! `server.port`), read from a deployment's base URL.

/// The server a model's calls go to: `server.address` and `server.port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    pub(crate) address: String,
    pub(crate) port: u16,
}

impl Server {
    /// The host and port of `base_url` (`scheme://host[:port][/path]`); the port
    /// defaults to the scheme's (443 for https, 80 for http). `None` if it is no URL.
    pub(crate) fn of(base_url: &str) -> Option<Server> {
        let (scheme, rest) = base_url.split_once("://")?;
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "https" => 443,
            "http" => 80,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        // Userinfo (`user:pass@`) never reaches an attribute.
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        if host.is_empty() {
            return None;
        }
        let port = match port {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        Some(Server {
            address: host.to_ascii_lowercase(),
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_address_and_port_come_from_the_base_url() {
        let of = |u: &str| Server::of(u).map(|s| (s.address, s.port));
        assert_eq!(
            of("https://api.anthropic.com"),
            Some(("api.anthropic.com".into(), 443))
        );
        assert_eq!(
            of("http://127.0.0.1:11434/v1"),
            Some(("127.0.0.1".into(), 11434))
        );
        assert_eq!(of("http://[::1]:8080/"), Some(("::1".into(), 8080)));
        assert_eq!(
            of("https://user:secret@proxy.example:8443/x"),
            Some(("proxy.example".into(), 8443))
        );
        assert_eq!(of("not a url"), None);
        assert_eq!(of("ftp://host"), None);
    }
}
