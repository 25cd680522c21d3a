//! Webhook targets and SSRF: `https://` only, and never a loopback, private
//! (RFC 1918, CGNAT, ULA), link-local, multicast or unspecified address,
//! whether written in the URL or resolved from its host name. The
//! development flag `--allow-local-webhooks` also admits `http://` and
//! loopback targets (never private networks).

use super::bounds::MAX_WEBHOOK_URL_BYTES;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// Whether an address is blocked as a webhook target (a webhook never reaches
/// it); `allow_loopback` admits loopback only.
pub fn blocked_ip(ip: IpAddr, allow_loopback: bool) -> bool {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4, allow_loopback),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => blocked_v4(v4, allow_loopback),
            None => blocked_v6(v6, allow_loopback),
        },
    }
}

fn blocked_v4(ip: Ipv4Addr, allow_loopback: bool) -> bool {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        return !allow_loopback;
    }
    ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || a >= 240
}

fn blocked_v6(ip: Ipv6Addr, allow_loopback: bool) -> bool {
    if ip.is_loopback() {
        return !allow_loopback;
    }
    let first = ip.segments()[0];
    ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
}

/// Checks a webhook URL as written (its resolved addresses are checked at delivery).
pub fn check_url(raw: &str, allow_local: bool) -> Result<(), &'static str> {
    if raw.len() > MAX_WEBHOOK_URL_BYTES {
        return Err("webhook.url is longer than 2048 bytes");
    }
    let url = url::Url::parse(raw).map_err(|_| "webhook.url must be an absolute URL")?;
    match url.scheme() {
        "https" => {}
        "http" if allow_local => {}
        _ => return Err("webhook.url must use https"),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("webhook.url must not carry credentials");
    }
    match url.host() {
        None => Err("webhook.url has no host"),
        Some(url::Host::Ipv4(ip)) if blocked_ip(IpAddr::V4(ip), allow_local) => {
            Err("webhook.url targets a loopback, private or link-local address")
        }
        Some(url::Host::Ipv6(ip)) if blocked_ip(IpAddr::V6(ip), allow_local) => {
            Err("webhook.url targets a loopback, private or link-local address")
        }
        Some(url::Host::Domain(d)) if local_name(d) && !allow_local => Err("webhook.url targets a local host name"),
        Some(_) => Ok(()),
    }
}

fn local_name(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "localhost" || h.ends_with(".localhost") || h.ends_with(".local") || h.ends_with(".internal")
}

/// Resolves `netloc` (host:port) for a delivery, refusing it when any address is refused.
pub fn resolve(netloc: &str, allow_local: bool) -> std::io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = netloc.to_socket_addrs()?.collect();
    if addrs.iter().any(|a| blocked_ip(a.ip(), allow_local)) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "webhook host resolves to a loopback, private or link-local address",
        ));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_public_only_by_default() {
        assert!(check_url("https://hooks.example.com/x", false).is_ok());
        assert!(check_url("http://hooks.example.com/x", false).is_err());
        for bad in [
            "https://10.0.0.1/h",
            "https://172.16.3.4/h",
            "https://192.168.1.1/h",
            "https://169.254.169.254/latest",
            "https://127.0.0.1/h",
            "https://[::1]/h",
            "https://[fd00::1]/h",
            "https://[fe80::1]/h",
            "https://[::ffff:10.0.0.1]/h",
            "https://0.0.0.0/h",
            "https://100.64.0.1/h",
            "https://localhost/h",
            "https://user:pw@example.com/h",
            "ftp://example.com/h",
            "not a url",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_development_flag_admits_http_and_loopback_only() {
        assert!(check_url("http://127.0.0.1:9000/hook", true).is_ok());
        assert!(check_url("http://localhost:9000/hook", true).is_ok());
        assert!(check_url("http://10.0.0.1/hook", true).is_err());
        assert!(check_url("https://192.168.0.1/hook", true).is_err());
    }

    #[test]
    fn resolved_addresses_are_checked() {
        assert!(resolve("127.0.0.1:80", false).is_err());
        assert!(resolve("127.0.0.1:80", true).is_ok());
        assert!(resolve("localhost:80", false).is_err());
    }
}
