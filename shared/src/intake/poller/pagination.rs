//! How a defined pull finds its pages ([`Pager`]): the first request from the definition's
//! `url` and `pagination`, then each next one from what a page said — a page number, an
//! offset, a cursor at a path of the body, a `Link: <…>; rel="next"` header or a URL at a path
//! of the body. Every next URL must have the origin (scheme, host, port) of the definition's
//! `url`; a cursor or URL already asked for ends the pull (a loop), and so does
//! [`MAX_EXPORT_PAGES`]. Pure: no clock, no network.

use super::MAX_EXPORT_PAGES;
use crate::domain::canonical_json::{parse_node, Node};
use crate::domain::definition::Pagination;
use crate::domain::mapping::json_path::JsonPath;
use crate::domain::timestamp::Timestamp;
use http::Uri;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::collections::BTreeSet;
use std::time::Duration;

/// What a query parameter's name and value are encoded with: all but `A-Z a-z 0-9 - . _ ~`.
const QUERY_ESCAPES: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One page to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// 1-based place of the page in this pull.
    pub sequence: u32,
    pub url: String,
    /// What the page was asked with: the cursor for cursor pagination (empty for the first
    /// page), else the request's query.
    pub asked_with: String,
}

/// Why a pull asked for no further page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    #[error("last page: the supplier named no next page")]
    LastPage,
    #[error("last page: the document's page_count was reached")]
    PageCountReached,
    #[error("last page: it held fewer rows than the limit")]
    ShortPage,
    /// The page held no rows: it is not a delivery, the one before it was the last.
    #[error("an empty page ends the pull")]
    EmptyPage,
    #[error("stopped: the page's rows could not be counted, so whether more follow is unknown")]
    Uncountable,
    #[error("stopped at the limit of {MAX_EXPORT_PAGES} pages")]
    PageLimit,
    #[error("stopped: the supplier named a cursor or URL already asked for (a loop)")]
    Repeated,
    #[error("stopped: the next page's URL leaves the origin of the definition's url")]
    OtherOrigin,
    #[error("stopped: the next page's URL cannot be read")]
    BadNext,
}

impl Stop {
    /// Whether the pull ended as the supplier meant it to (not a guard).
    pub fn is_end(&self) -> bool {
        matches!(
            self,
            Stop::LastPage | Stop::PageCountReached | Stop::ShortPage | Stop::EmptyPage
        )
    }
}

/// What the pager reads of a fetched page.
#[derive(Debug, Clone, Copy)]
pub struct PageFacts<'a> {
    pub body: &'a [u8],
    /// The `Link` header, if any.
    pub link: Option<&'a str>,
    /// The page's rows as the definition reads them (`None`: unreadable).
    pub rows: Option<usize>,
    /// The document's `page_count`, where the definition reads one.
    pub page_count: Option<u64>,
}

/// The pagination state of one pull.
#[derive(Debug, Clone)]
pub struct Pager {
    pagination: Pagination,
    base: String,
    origin: Uri,
    seen: BTreeSet<String>,
}

impl Pager {
    /// `None` when the definition's `url` is not an absolute URL.
    pub fn new(url: &str, pagination: &Pagination) -> Option<Self> {
        let origin: Uri = url.parse().ok()?;
        origin.scheme()?;
        origin.host()?;
        Some(Self {
            pagination: pagination.clone(),
            base: url.to_owned(),
            origin,
            seen: BTreeSet::new(),
        })
    }

    /// Page 1's request.
    pub fn first(&mut self) -> PageRequest {
        let (url, asked_with) = match &self.pagination {
            Pagination::PageNumber { param, first } => {
                (with_query(&self.base, &[(param, &first.to_string())]), None)
            }
            Pagination::OffsetLimit {
                offset_param,
                limit_param,
                limit,
            } => (
                with_query(
                    &self.base,
                    &[(offset_param, "0"), (limit_param, &limit.to_string())],
                ),
                None,
            ),
            Pagination::Cursor { .. } => (self.base.clone(), Some(String::new())),
            Pagination::LinkHeader | Pagination::NextUrl { .. } => (self.base.clone(), None),
        };
        self.seen.insert(url.clone());
        request(1, url, asked_with)
    }

    /// The request after `current`, given what its page said.
    pub fn next(
        &mut self,
        current: &PageRequest,
        facts: &PageFacts<'_>,
    ) -> Result<PageRequest, Stop> {
        if facts.rows == Some(0)
            && current.sequence > 1
            && matches!(
                self.pagination,
                Pagination::PageNumber { .. } | Pagination::OffsetLimit { .. }
            )
        {
            return Err(Stop::EmptyPage);
        }
        if current.sequence >= MAX_EXPORT_PAGES {
            return Err(Stop::PageLimit);
        }
        let sequence = current.sequence.saturating_add(1);
        let (url, asked_with) = match &self.pagination {
            Pagination::PageNumber { param, first } => {
                let rows = facts.rows.ok_or(Stop::Uncountable)?;
                if rows == 0 {
                    return Err(Stop::LastPage);
                }
                if facts
                    .page_count
                    .is_some_and(|count| u64::from(current.sequence) >= count)
                {
                    return Err(Stop::PageCountReached);
                }
                let number = first.saturating_add(current.sequence);
                (
                    with_query(&self.base, &[(param, &number.to_string())]),
                    None,
                )
            }
            Pagination::OffsetLimit {
                offset_param,
                limit_param,
                limit,
            } => {
                let rows = facts.rows.ok_or(Stop::Uncountable)?;
                if rows < *limit as usize {
                    return Err(Stop::ShortPage);
                }
                let offset = u64::from(*limit) * u64::from(current.sequence);
                let query = [
                    (offset_param.as_str(), offset.to_string()),
                    (limit_param.as_str(), limit.to_string()),
                ];
                let pairs: Vec<(&str, &str)> =
                    query.iter().map(|(k, v)| (*k, v.as_str())).collect();
                (with_query(&self.base, &pairs), None)
            }
            Pagination::Cursor { path, param } => {
                let cursor = text_at(facts.body, path).ok_or(Stop::LastPage)?;
                (with_query(&self.base, &[(param, &cursor)]), Some(cursor))
            }
            Pagination::LinkHeader => {
                let target = facts.link.and_then(link_next).ok_or(Stop::LastPage)?;
                (self.same_origin(&current.url, &target)?, None)
            }
            Pagination::NextUrl { path } => {
                let target = text_at(facts.body, path).ok_or(Stop::LastPage)?;
                (self.same_origin(&current.url, &target)?, None)
            }
        };
        if !self.seen.insert(url.clone()) {
            return Err(Stop::Repeated);
        }
        Ok(request(sequence, url, asked_with))
    }

    /// `target` resolved against `current`, if it has the definition's origin.
    fn same_origin(&self, current: &str, target: &str) -> Result<String, Stop> {
        let current: Uri = current.parse().map_err(|_| Stop::BadNext)?;
        let resolved = resolve(&current, target).ok_or(Stop::BadNext)?;
        let uri: Uri = resolved.parse().map_err(|_| Stop::BadNext)?;
        if same_origin(&self.origin, &uri) {
            Ok(resolved)
        } else {
            Err(Stop::OtherOrigin)
        }
    }
}

fn request(sequence: u32, url: String, asked_with: Option<String>) -> PageRequest {
    let asked_with = asked_with.unwrap_or_else(|| {
        url.parse::<Uri>()
            .ok()
            .and_then(|u| u.query().map(str::to_owned))
            .unwrap_or_default()
    });
    PageRequest {
        sequence,
        url,
        asked_with,
    }
}

/// `base` with `pairs` appended to its query, each name and value percent-encoded.
pub fn with_query(base: &str, pairs: &[(&str, &str)]) -> String {
    let mut url = base.to_owned();
    for (name, value) in pairs {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.extend(utf8_percent_encode(name, QUERY_ESCAPES));
        url.push('=');
        url.extend(utf8_percent_encode(value, QUERY_ESCAPES));
    }
    url
}

/// A string (or a number, as written) at `path` of a JSON `body`; `None` when absent, null or
/// empty.
fn text_at(body: &[u8], path: &str) -> Option<String> {
    let root = parse_node(body).ok()?;
    let path = JsonPath::parse(path).ok()?;
    match path.select(&root)? {
        Node::String(text) if !text.is_empty() => Some(text.to_string()),
        Node::Number(text) => Some(text.to_string()),
        _ => None,
    }
}

/// The target of the `rel="next"` link of a `Link` header (RFC 8288): links separated by
/// commas, each `<target>` then `; name=value` parameters; `rel` may be quoted and may list
/// several relation types (`rel="next last"`), compared without regard to case.
pub fn link_next(header: &str) -> Option<String> {
    let mut rest = header;
    while let Some((_, after)) = rest.split_once('<') {
        let (target, after) = after.split_once('>')?;
        let params = after.split('<').next().unwrap_or_default();
        let is_next = params.split(';').any(|param| {
            let Some((name, value)) = param.split_once('=') else {
                return false;
            };
            let value = value.trim().trim_end_matches(',').trim().trim_matches('"');
            name.trim().eq_ignore_ascii_case("rel")
                && value
                    .split_ascii_whitespace()
                    .any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        if is_next && !target.trim().is_empty() {
            return Some(target.trim().to_owned());
        }
        rest = after;
    }
    None
}

/// A URL reference resolved against `current`: absolute, `//authority…`, `/path…`, `?query`
/// or a path relative to the current one's directory.
pub fn resolve(current: &Uri, reference: &str) -> Option<String> {
    let scheme = current.scheme_str()?;
    let authority = current.authority()?;
    if reference
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return None;
    }
    if let Ok(uri) = reference.parse::<Uri>() {
        if uri.scheme().is_some() {
            return Some(reference.to_owned());
        }
    }
    if reference.starts_with("//") {
        return Some(format!("{scheme}:{reference}"));
    }
    if reference.starts_with('/') {
        return Some(format!("{scheme}://{authority}{reference}"));
    }
    let path = current.path();
    if reference.starts_with('?') {
        return Some(format!("{scheme}://{authority}{path}{reference}"));
    }
    let directory = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    Some(format!("{scheme}://{authority}{directory}/{reference}"))
}

/// The same scheme, host (any case) and port (the scheme's default when none is written).
pub fn same_origin(a: &Uri, b: &Uri) -> bool {
    let port = |u: &Uri| {
        u.port_u16().or(match u.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        })
    };
    a.scheme() == b.scheme()
        && a.host().map(str::to_ascii_lowercase) == b.host().map(str::to_ascii_lowercase)
        && port(a) == port(b)
}

/// A `Retry-After` value (RFC 9110): delay seconds, or an HTTP date (then the time from `now`
/// until it, zero for a date past). `None` when it is neither.
pub fn retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(value)
        .ok()?;
    let seconds = at.as_second().saturating_sub(now.unix_seconds());
    Some(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

#[cfg(test)]
#[path = "pagination_tests.rs"]
mod tests;
