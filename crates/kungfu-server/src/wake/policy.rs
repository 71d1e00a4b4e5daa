//! Where a wake webhook may point: the operator's `[wake]` bounds, and the address ranges a webhook may never reach
//! unless the operator says so. A webhook URL is chosen by a user but fetched by the node, from inside the node's
//! network, so without these checks it would be a way to make the node POST to its own loopback services, to
//! private hosts next to it, or to a cloud metadata endpoint (server-side request forgery).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The operator's `[wake]` bounds on where a webhook may point.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WakePolicy {
    /// URL schemes a target may use ("https" only by default; "http" for tests/private nets).
    pub schemes: Vec<String>,
    /// Host patterns a target's host must match: "*" (any), "hooks.example.com" (exact, case-insensitive),
    /// "*.example.com" (any subdomain, not the apex).
    pub hosts: Vec<String>,
    /// Allow loopback/private/link-local/etc destinations (false by default).
    pub allow_private: bool,
}

impl Default for WakePolicy {
    fn default() -> Self {
        WakePolicy { schemes: vec!["https".to_owned()], hosts: vec!["*".to_owned()], allow_private: false }
    }
}

/// The longest target URL accepted. Far above any real webhook URL; it bounds what is stored and sent per target.
pub const MAX_URL_BYTES: usize = 2048;

/// The schemes the sender can speak, whatever the policy lists: a policy naming another scheme must not make a
/// target look valid when no delivery to it could ever be made.
const SUPPORTED_SCHEMES: [&str; 2] = ["https", "http"];

/// A refusal of a target URL: the message names the field `url` and says what to do next.
pub fn check_url(policy: &WakePolicy, url: &str) -> Result<url::Url, String> {
    if url.len() > MAX_URL_BYTES {
        return Err(format!("url: is {} bytes, over the limit of {MAX_URL_BYTES}; use a shorter URL", url.len()));
    }
    let parsed = url::Url::parse(url)
        .map_err(|e| format!("url: is not a valid absolute URL ({e}); give one like https://hooks.example.com/wake"))?;

    let scheme = parsed.scheme();
    if !SUPPORTED_SCHEMES.contains(&scheme) {
        return Err(format!("url: scheme \"{scheme}\" is not supported; use an https URL"));
    }
    if !policy.schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        let next = if policy.schemes.iter().any(|s| s.eq_ignore_ascii_case("https")) {
            "use an https URL"
        } else {
            "use a URL with an allowed scheme"
        };
        return Err(format!(
            "url: scheme \"{scheme}\" is not allowed (allowed: {}); {next} or ask the operator to allow it in \
             [wake] schemes",
            list(&policy.schemes)
        ));
    }

    let Some(host) = parsed.host() else {
        return Err("url: has no host; give one like https://hooks.example.com/wake".to_owned());
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Credentials in a URL end up in logs and listings; deliveries are authenticated by their signature.
        return Err("url: must not contain credentials (user:password@); remove them: the receiver authenticates \
                    deliveries by their webhook-signature header"
            .to_owned());
    }
    if parsed.fragment().is_some() {
        return Err("url: must not have a fragment (#...); remove it: it is never sent to the receiver".to_owned());
    }

    if !policy.hosts.iter().any(|p| host_matches(p, &host)) {
        return Err(format!(
            "url: host \"{}\" is not allowed (allowed: {}); use a host the operator allows in [wake] hosts",
            display_host(&host),
            list(&policy.hosts)
        ));
    }

    // A literal address never goes through the resolver, so this is where it is checked; names are checked at
    // every delivery, against what they resolve to then.
    let literal = match host {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    };
    if let Some(ip) = literal
        && !policy.allow_private
        && let Some(why) = forbidden_address(ip)
    {
        let shown = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        return Err(format!(
            "url: host {shown} is not a public address ({why}); use a public address or ask the operator to set \
             [wake] allow_private"
        ));
    }
    Ok(parsed)
}

/// Why an address may not be a webhook destination, or None if it may (when !allow_private).
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        _ if ip.is_unspecified() => Some("unspecified"),
        (0, _, _) => Some("\"this network\" (0.0.0.0/8)"),
        (10, _, _) => Some("private (RFC 1918)"),
        (100, 64..=127, _) => Some("carrier-grade NAT"),
        (127, _, _) => Some("loopback"),
        // Includes 169.254.169.254, the cloud metadata endpoint.
        (169, 254, _) => Some("link-local"),
        (172, 16..=31, _) => Some("private (RFC 1918)"),
        (192, 0, 0) => Some("IETF protocol assignment (192.0.0.0/24)"),
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Some("documentation"),
        (192, 168, _) => Some("private (RFC 1918)"),
        (198, 18..=19, _) => Some("benchmarking"),
        (224..=239, _, _) => Some("multicast"),
        _ if ip.is_broadcast() => Some("broadcast"),
        (240..=255, _, _) => Some("reserved"),
        _ => None,
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // Forms that carry an IPv4 address are judged by that address: a translator or tunnel would deliver to it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    match s {
        // ::/96 less :: and ::1 (above): deprecated, and read as IPv4 by some stacks.
        [0, 0, 0, 0, 0, 0, _, _] => Some("IPv4-compatible (deprecated)"),
        // Well-known NAT64 prefix: the translator delivers to the embedded IPv4 address.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => forbidden_v4(embedded_v4(s[6], s[7])),
        [0x64, 0xff9b, 1, ..] => Some("local-use NAT64 (RFC 8215)"),
        [0x100, 0, 0, 0, ..] => Some("discard-only (100::/64)"),
        [0x2001, 0xdb8, ..] => Some("documentation"),
        // 2001::/23 (Teredo, benchmarking, ORCHID, ...): protocol plumbing, never a webhook receiver.
        [0x2001, 0..=0x1ff, ..] => Some("IETF protocol assignment (2001::/23)"),
        // 6to4: the relay delivers to the IPv4 address in bits 16..48.
        [0x2002, hi, lo, ..] => forbidden_v4(embedded_v4(hi, lo)).map(|_| "6to4 of a non-public IPv4 address"),
        [0x3fff, 0..=0x0fff, ..] => Some("documentation"),
        [0xfc00..=0xfdff, ..] => Some("unique local (IPv6)"),
        [0xfe80..=0xfebf, ..] => Some("link-local"),
        [0xfec0..=0xfeff, ..] => Some("site-local (deprecated)"),
        [0xff00..=0xffff, ..] => Some("multicast"),
        _ => None,
    }
}

fn embedded_v4(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// Whether a host matches one `[wake] hosts` pattern. Patterns and names compare case-insensitively and without a
/// trailing dot (the root label), since "example.com." and "example.com" are the same name.
fn host_matches(pattern: &str, host: &url::Host<&str>) -> bool {
    let pattern = pattern.trim().trim_end_matches('.');
    if pattern == "*" {
        return true;
    }
    match host {
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            match pattern.strip_prefix('*').filter(|suffix| suffix.starts_with('.')) {
                // The dot is kept in the suffix so "*.example.com" matches "a.example.com" but neither the apex
                // nor "badexample.com".
                Some(suffix) => {
                    name.len() > suffix.len()
                        && name.get(name.len() - suffix.len()..).is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
                }
                None => name.eq_ignore_ascii_case(pattern),
            }
        }
        // Addresses only match exactly; a wildcard of labels means nothing for them.
        url::Host::Ipv4(v4) => pattern.parse::<Ipv4Addr>().is_ok_and(|p| p == *v4),
        url::Host::Ipv6(v6) => {
            pattern.trim_start_matches('[').trim_end_matches(']').parse::<Ipv6Addr>().is_ok_and(|p| p == *v6)
        }
    }
}

fn display_host(host: &url::Host<&str>) -> String {
    match host {
        url::Host::Domain(name) => (*name).to_owned(),
        url::Host::Ipv4(v4) => v4.to_string(),
        url::Host::Ipv6(v6) => format!("[{v6}]"),
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() { "none".to_owned() } else { items.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Option<&'static str> {
        forbidden_address(IpAddr::V4(s.parse().expect("an address")))
    }

    fn v6(s: &str) -> Option<&'static str> {
        forbidden_address(IpAddr::V6(s.parse().expect("an address")))
    }

    /// Each forbidden IPv4 range, at its first and last address, and the addresses just outside it.
    #[test]
    fn ipv4_ranges_are_refused_at_their_edges() {
        let ranges: &[(&str, &str, &str)] = &[
            ("0.0.0.1", "0.255.255.255", "\"this network\" (0.0.0.0/8)"),
            ("10.0.0.0", "10.255.255.255", "private (RFC 1918)"),
            ("100.64.0.0", "100.127.255.255", "carrier-grade NAT"),
            ("127.0.0.0", "127.255.255.255", "loopback"),
            ("169.254.0.0", "169.254.255.255", "link-local"),
            ("172.16.0.0", "172.31.255.255", "private (RFC 1918)"),
            ("192.0.0.0", "192.0.0.255", "IETF protocol assignment (192.0.0.0/24)"),
            ("192.0.2.0", "192.0.2.255", "documentation"),
            ("192.168.0.0", "192.168.255.255", "private (RFC 1918)"),
            ("198.18.0.0", "198.19.255.255", "benchmarking"),
            ("198.51.100.0", "198.51.100.255", "documentation"),
            ("203.0.113.0", "203.0.113.255", "documentation"),
            ("224.0.0.0", "239.255.255.255", "multicast"),
            ("240.0.0.0", "255.255.255.254", "reserved"),
        ];
        for (first, last, why) in ranges {
            assert_eq!(v4(first), Some(*why), "{first}");
            assert_eq!(v4(last), Some(*why), "{last}");
        }
        assert_eq!(v4("0.0.0.0"), Some("unspecified"));
        assert_eq!(v4("255.255.255.255"), Some("broadcast"));
        assert_eq!(v4("169.254.169.254"), Some("link-local"));

        let outside = [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "191.255.255.255",
            "192.0.1.0",
            "192.0.3.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
            "8.8.8.8",
            "1.1.1.1",
        ];
        for ip in outside {
            assert_eq!(v4(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_ranges_are_refused_at_their_edges() {
        let ranges: &[(&str, &str, &str)] = &[
            ("::2", "::ffff:ffff", "IPv4-compatible (deprecated)"),
            ("64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "local-use NAT64 (RFC 8215)"),
            ("100::", "100::ffff:ffff:ffff:ffff", "discard-only (100::/64)"),
            ("2001::", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol assignment (2001::/23)"),
            ("2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"),
            ("3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"),
            ("fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique local (IPv6)"),
            ("fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"),
            ("fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local (deprecated)"),
            ("ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"),
        ];
        for (first, last, why) in ranges {
            assert_eq!(v6(first), Some(*why), "{first}");
            assert_eq!(v6(last), Some(*why), "{last}");
        }
        assert_eq!(v6("::"), Some("unspecified"));
        assert_eq!(v6("::1"), Some("loopback"));

        let outside = [
            "::1:0:0:0",
            "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff",
            "64:ff9b:2::",
            "100:0:0:1::",
            "2001:200::",
            "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff",
            "2001:db9::",
            "3fff:1000::",
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fe00::",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
        ];
        for ip in outside {
            assert_eq!(v6(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_are_judged_by_the_ipv4_address() {
        // IPv4-mapped (::ffff:0:0/96).
        assert_eq!(v6("::ffff:127.0.0.1"), Some("loopback"));
        assert_eq!(v6("::ffff:10.1.2.3"), Some("private (RFC 1918)"));
        assert_eq!(v6("::ffff:169.254.169.254"), Some("link-local"));
        assert_eq!(v6("::ffff:0.0.0.0"), Some("unspecified"));
        assert_eq!(v6("::ffff:8.8.8.8"), None);
        // NAT64 (64:ff9b::/96).
        assert_eq!(v6("64:ff9b::7f00:1"), Some("loopback"));
        assert_eq!(v6("64:ff9b::a9fe:a9fe"), Some("link-local"));
        assert_eq!(v6("64:ff9b::c0a8:1"), Some("private (RFC 1918)"));
        assert_eq!(v6("64:ff9b::808:808"), None);
        // 6to4 (2002::/16): the IPv4 address sits right after the prefix.
        assert_eq!(v6("2002:7f00:1::"), Some("6to4 of a non-public IPv4 address"));
        assert_eq!(v6("2002:a00:1::1"), Some("6to4 of a non-public IPv4 address"));
        assert_eq!(v6("2002:a9fe:a9fe::"), Some("6to4 of a non-public IPv4 address"));
        assert_eq!(v6("2002:808:808::1"), None);
    }

    fn http_too() -> WakePolicy {
        WakePolicy { schemes: vec!["https".into(), "http".into()], ..WakePolicy::default() }
    }

    #[test]
    fn default_policy_is_https_anywhere_public() {
        let p = WakePolicy::default();
        assert_eq!(p.schemes, ["https"]);
        assert_eq!(p.hosts, ["*"]);
        assert!(!p.allow_private);
        assert_eq!(
            check_url(&p, "https://hooks.example.com/wake?x=1").expect("allowed").as_str(),
            "https://hooks.example.com/wake?x=1"
        );
        assert!(check_url(&p, "https://8.8.8.8/").is_ok());
        assert!(check_url(&p, "https://[2606:4700:4700::1111]:8443/").is_ok());
    }

    #[test]
    fn policy_deserializes_with_defaults_and_refuses_unknown_fields() {
        let p: WakePolicy = serde_json::from_str(r#"{"allow_private": true}"#).expect("a policy");
        assert_eq!(p, WakePolicy { allow_private: true, ..WakePolicy::default() });
        assert!(serde_json::from_str::<WakePolicy>(r#"{"allow_privat": true}"#).is_err());
    }

    #[test]
    fn scheme_must_be_allowed_and_supported() {
        let e = check_url(&WakePolicy::default(), "http://hooks.example.com/").expect_err("refused");
        assert_eq!(
            e,
            "url: scheme \"http\" is not allowed (allowed: https); use an https URL or ask the operator to allow it \
             in [wake] schemes"
        );
        assert!(check_url(&http_too(), "http://hooks.example.com/").is_ok());
        let ftp = WakePolicy { schemes: vec!["ftp".into()], ..WakePolicy::default() };
        assert!(check_url(&ftp, "ftp://hooks.example.com/").expect_err("refused").contains("not supported"));
        let none = WakePolicy { schemes: vec![], ..WakePolicy::default() };
        assert!(check_url(&none, "https://hooks.example.com/").expect_err("refused").contains("(allowed: none)"));
    }

    #[test]
    fn malformed_or_oversized_urls_are_refused() {
        let p = WakePolicy::default();
        for bad in ["", "hooks.example.com/wake", "https://", "https://exa mple.com/", "/relative"] {
            let e = check_url(&p, bad).expect_err("refused");
            assert!(e.starts_with("url: "), "{bad}: {e}");
        }
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_URL_BYTES));
        assert!(check_url(&p, &long).expect_err("refused").contains("over the limit of 2048"));
        let just =
            format!("https://hooks.example.com/{}", "a".repeat(MAX_URL_BYTES - "https://hooks.example.com/".len()));
        assert_eq!(just.len(), MAX_URL_BYTES);
        assert!(check_url(&p, &just).is_ok());
    }

    #[test]
    fn credentials_and_fragments_are_refused() {
        let p = WakePolicy::default();
        assert!(check_url(&p, "https://user:pw@hooks.example.com/").expect_err("refused").contains("credentials"));
        assert!(check_url(&p, "https://user@hooks.example.com/").expect_err("refused").contains("credentials"));
        assert!(check_url(&p, "https://:pw@hooks.example.com/").expect_err("refused").contains("credentials"));
        assert!(check_url(&p, "https://hooks.example.com/#x").expect_err("refused").contains("fragment"));
        assert!(check_url(&p, "https://hooks.example.com/#").expect_err("refused").contains("fragment"));
    }

    #[test]
    fn hosts_must_match_a_pattern() {
        let p = WakePolicy {
            hosts: vec![
                "hooks.example.com".into(),
                "*.agents.example.org".into(),
                "203.0.114.7".into(),
                "[2606:4700::1]".into(),
            ],
            ..WakePolicy::default()
        };
        for ok in [
            "https://hooks.example.com/",
            "https://HOOKS.Example.COM/",
            "https://hooks.example.com./",
            "https://a.agents.example.org/",
            "https://a.b.agents.example.org/",
            "https://203.0.114.7/",
            "https://[2606:4700::1]/",
        ] {
            assert!(check_url(&p, ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://example.com/",
            "https://evil-hooks.example.com/",
            "https://hooks.example.com.evil.net/",
            "https://agents.example.org/",
            "https://badagents.example.org/",
            "https://203.0.114.8/",
            "https://[2606:4700::2]/",
        ] {
            let e = check_url(&p, bad).expect_err("refused");
            assert!(e.contains("is not allowed (allowed: hooks.example.com, *.agents.example.org"), "{bad}: {e}");
            assert!(e.ends_with("use a host the operator allows in [wake] hosts"), "{e}");
        }
    }

    #[test]
    fn non_public_literals_are_refused_unless_allowed() {
        let p = http_too();
        for bad in [
            "http://127.0.0.1:8080/",
            "http://[::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.5/",
            "http://[::ffff:192.168.1.1]/",
            "http://[fe80::1]/",
            // Shorthand and numeric forms are parsed as the addresses they are.
            "http://0x7f.1/",
            "http://2130706433/",
            "http://0/",
        ] {
            assert!(check_url(&p, bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_url(&p, "http://127.0.0.1:8080/").expect_err("refused"),
            "url: host 127.0.0.1 is not a public address (loopback); use a public address or ask the operator to set \
             [wake] allow_private"
        );
        let private = WakePolicy { allow_private: true, ..http_too() };
        for ok in ["http://127.0.0.1:8080/", "http://[::1]/", "http://10.0.0.5/"] {
            assert!(check_url(&private, ok).is_ok(), "{ok}");
        }
        // Names are not resolved here: that happens at each delivery.
        assert!(check_url(&p, "http://localhost:8080/").is_ok());
    }
}
