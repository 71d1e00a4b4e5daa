//! [`Toolsets`]: which of the door's tools a connection is offered (issue #31). Every tool a host
//! lists is put in front of its model on every turn, so the door offers an agent's everyday work by
//! default and the rest only when the host asks for it:
//!
//! - [`Toolset::Default`], always served: registering, the turn and `turn_wait`, opportunities and
//!   working sets, threads and posting, assignments, Tasks and Memories (every agent service but
//!   the two below).
//! - [`Toolset::Coord`], opt-in: the coordination layer (`CoordService`: labeled writes, send,
//!   scatter, mailbox, collective, barrier).
//! - [`Toolset::Records`], opt-in: shared records (`RecordService`).
//!
//! A host names the opt-in sets it wants, comma-separated, in the MCP URL's query
//! (`/mcp?toolsets=coord,records`), in the [`HEADER`] header, or with `kungfu mcp --toolsets`;
//! `all` names every set. The default set is served whatever is named, because no agent works
//! without registering and reading its turn. An unknown name is refused, naming the known ones.
//! The operator's `AdminService` is no tool at all: it is not an agent's to call.

use std::fmt;

/// The query parameter of the MCP URL that names toolsets.
pub const QUERY: &str = "toolsets";
/// The HTTP header that names toolsets (the GitHub MCP server's name for the same thing, so hosts
/// that already set it need nothing new). The query parameter wins when both are given.
pub const HEADER: &str = "x-mcp-toolsets";
/// The name that selects every set.
pub const ALL: &str = "all";
/// The most names one selection may carry: there are three sets, so more is a mistake, and the
/// bound keeps a hostile header from costing more than a few comparisons.
const MAX_NAMES: usize = 16;
/// The longest name echoed back in an error.
const MAX_ECHOED: usize = 32;

/// One set of tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Toolset {
    Default,
    Coord,
    Records,
}

impl Toolset {
    /// Every set, in the order documentation lists them.
    pub const ALL: [Toolset; 3] = [Toolset::Default, Toolset::Coord, Toolset::Records];

    pub fn name(self) -> &'static str {
        match self {
            Toolset::Default => "default",
            Toolset::Coord => "coord",
            Toolset::Records => "records",
        }
    }

    /// What the set is for, one line (the tool table and `--help`).
    pub fn about(self) -> &'static str {
        match self {
            Toolset::Default => {
                "always served: register, turn and turn_wait, working sets, threads and posting, assignments, Tasks, Memories"
            }
            Toolset::Coord => "opt-in: labeled Memories, send, scatter, mailbox, collective, barrier (COORDINATION)",
            Toolset::Records => "opt-in: shared records (create, patch, read, events, bodies)",
        }
    }

    /// The set of a tool served by a method of `service` (a full name, `kungfu.v1.CoordService`).
    pub fn of_service(service: &str) -> Toolset {
        match service {
            "kungfu.v1.CoordService" => Toolset::Coord,
            "kungfu.v1.RecordService" => Toolset::Records,
            _ => Toolset::Default,
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sets a connection is offered: always [`Toolset::Default`], plus the opt-in sets named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Toolsets(u8);

impl Default for Toolsets {
    fn default() -> Toolsets {
        Toolsets(Toolset::Default.bit())
    }
}

/// A selection the door cannot serve: it names a set the door does not have (or is not text), or
/// names more sets than there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: the toolsets are {known} (or `all`); name them comma-separated, e.g. ?toolsets=coord,records")]
pub struct UnknownToolset {
    what: String,
    known: String,
}

impl UnknownToolset {
    fn new(name: &str) -> UnknownToolset {
        let shown: String = name.chars().take(MAX_ECHOED).collect();
        UnknownToolset::because(format!("unknown toolset {shown:?}"))
    }

    fn because(what: String) -> UnknownToolset {
        let known: Vec<&str> = Toolset::ALL.iter().map(|t| t.name()).collect();
        UnknownToolset { what, known: known.join(", ") }
    }

    /// The names a selection may use, for an error's structured data.
    pub fn known() -> Vec<&'static str> {
        Toolset::ALL.iter().map(|t| t.name()).chain([ALL]).collect()
    }
}

impl Toolsets {
    /// Every set.
    pub fn all() -> Toolsets {
        Toolset::ALL.iter().fold(Toolsets::default(), |s, t| s.with(*t))
    }

    /// The default set and `extra`.
    pub fn with(self, extra: Toolset) -> Toolsets {
        Toolsets(self.0 | extra.bit())
    }

    pub fn contains(self, set: Toolset) -> bool {
        self.0 & set.bit() != 0
    }

    /// The sets in documentation order.
    pub fn iter(self) -> impl Iterator<Item = Toolset> {
        Toolset::ALL.into_iter().filter(move |t| self.contains(*t))
    }

    /// A selection as a host writes it: names separated by commas (spaces allowed, case ignored),
    /// `all` for every set; empty is the default set alone.
    pub fn parse(text: &str) -> Result<Toolsets, UnknownToolset> {
        let mut sets = Toolsets::default();
        for (i, raw) in text.split(',').enumerate() {
            let name = raw.trim();
            if i >= MAX_NAMES {
                return Err(UnknownToolset::because(format!("more than {MAX_NAMES} toolsets named")));
            }
            if name.is_empty() {
                continue;
            }
            if name.eq_ignore_ascii_case(ALL) {
                sets = Toolsets::all();
                continue;
            }
            let set = Toolset::ALL
                .into_iter()
                .find(|t| t.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| UnknownToolset::new(name))?;
            sets = sets.with(set);
        }
        Ok(sets)
    }

    /// The selection of an HTTP request: its `toolsets` query parameter, else its [`HEADER`];
    /// `None` when it names none (the door's own selection applies).
    pub fn from_request(uri: &http::Uri, headers: &http::HeaderMap) -> Option<Result<Toolsets, UnknownToolset>> {
        let from_query = uri.query().and_then(|q| {
            q.split('&').find_map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (k == QUERY).then(|| percent_decoded(v))
            })
        });
        if let Some(v) = from_query {
            return Some(Toolsets::parse(&v));
        }
        let header = headers.get(HEADER)?;
        Some(match header.to_str() {
            Ok(v) => Toolsets::parse(v),
            Err(_) => Err(UnknownToolset::because(format!("the {HEADER} header is not visible ASCII"))),
        })
    }
}

impl fmt::Display for Toolsets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Toolset::name).collect();
        f.write_str(&names.join(","))
    }
}

/// A query value with `%2C`-style escapes and `+` decoded: hosts that build the URL with a URL
/// library escape the comma. A malformed escape is kept as it is and then fails as a name.
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_set_is_always_served_and_opt_in_sets_add_to_it() {
        assert_eq!(Toolsets::parse("").map(|s| s.to_string()), Ok("default".to_string()));
        assert_eq!(Toolsets::parse("coord").map(|s| s.to_string()), Ok("default,coord".to_string()));
        assert_eq!(
            Toolsets::parse(" Records , coord ").map(|s| s.to_string()),
            Ok("default,coord,records".to_string())
        );
        assert_eq!(Toolsets::parse("all"), Ok(Toolsets::all()));
        assert_eq!(Toolsets::parse("default"), Ok(Toolsets::default()));
    }

    #[test]
    fn an_unknown_set_is_refused_naming_the_known_ones() {
        let e = Toolsets::parse("coord,admin").expect_err("admin is no toolset");
        let text = e.to_string();
        assert!(text.contains("\"admin\""), "{text}");
        assert!(text.contains("default, coord, records") && text.contains("`all`"), "{text}");
        let long = "x".repeat(1000);
        assert!(Toolsets::parse(&long).expect_err("unknown").to_string().len() < 300, "the name is not echoed whole");
        let many = vec!["coord"; 40].join(",");
        let e = Toolsets::parse(&many).expect_err("a selection is bounded").to_string();
        assert!(e.starts_with("more than 16 toolsets named") && e.contains("default, coord, records"), "{e}");
    }

    #[test]
    fn a_request_names_its_sets_in_the_query_or_a_header() {
        let headers = |v: Option<&str>| {
            let mut h = http::HeaderMap::new();
            if let Some(v) = v {
                h.insert(HEADER, v.parse().expect("header"));
            }
            h
        };
        let uri = |s: &str| s.parse::<http::Uri>().expect("uri");
        assert_eq!(Toolsets::from_request(&uri("/mcp"), &headers(None)), None);
        assert_eq!(
            Toolsets::from_request(&uri("/mcp?a=1&toolsets=coord%2Crecords"), &headers(None)),
            Some(Ok(Toolsets::all()))
        );
        assert_eq!(
            Toolsets::from_request(&uri("/mcp"), &headers(Some("records"))),
            Some(Ok(Toolsets::default().with(Toolset::Records)))
        );
        assert_eq!(
            Toolsets::from_request(&uri("/mcp?toolsets=coord"), &headers(Some("records"))),
            Some(Ok(Toolsets::default().with(Toolset::Coord))),
            "the query wins"
        );
        assert!(matches!(Toolsets::from_request(&uri("/mcp?toolsets=nope"), &headers(None)), Some(Err(_))));
        assert_eq!(percent_decoded("a%2"), "a%2", "a cut escape stays as it is");
    }
}
