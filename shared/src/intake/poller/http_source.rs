//! The poller's HTTP client, which a connector's configuration cannot aim inside the network.
//!
//! A connector names its export URL, and an operator (or whoever can write connector items)
//! could name `http://169.254.169.254/…` or an internal host; the supplier itself could answer
//! with a redirect there. So: https only; every address the host resolves to is checked at
//! connect time (by the resolver, so a DNS answer that changes between check and connect
//! cannot slip past) and refused when it is loopback, private, link-local (the instance
//! metadata service), shared (CGNAT), multicast or otherwise not a public unicast address;
//! redirects are followed only to the same scheme, host and port, at most
//! [`MAX_REDIRECTS`] times; the connector may narrow the hosts further (`allowed_hosts`);
//! bodies are capped at [`MAX_EXPORT_PAGE_BYTES`] and each request at the connector's
//! `page_timeout_ms`; no environment proxy is used. Callers get a generic reason
//! ([`FetchError`]); the details are logged only.
//!
//! The local stack's fake supplier listens on 127.0.0.1 over plain http: only
//! [`HttpExportSource::allowing_loopback_http`], which the local stack alone constructs, lets
//! a request go there. The deployed functions use [`HttpExportSource::new`], whatever a
//! connector says.

use super::{ExportSource, FetchError, MAX_EXPORT_PAGE_BYTES};
use crate::domain::connector::PullSettings;
use async_trait::async_trait;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;
use tracing::warn;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// Redirects followed for one page, each to the same scheme, host and port.
pub const MAX_REDIRECTS: u32 = 3;

/// `ExportSource` over HTTPS (ureq with rustls, run on the blocking pool). Sends no
/// credential: `credential_ref` is recorded with the run, resolving it is the caller's concern.
#[derive(Debug, Clone)]
pub struct HttpExportSource {
    agent: ureq::Agent,
    policy: Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    /// The local stack only: `http://` and loopback addresses are allowed.
    loopback_http: bool,
}

impl HttpExportSource {
    /// The deployed poller's client: https to public addresses only.
    pub fn new() -> Self {
        Self::with_policy(Policy {
            loopback_http: false,
        })
    }

    /// The local stack's client: also plain http to 127.0.0.0/8 and ::1, where its fake
    /// supplier listens. Every other rule holds.
    pub fn allowing_loopback_http() -> Self {
        Self::with_policy(Policy {
            loopback_http: true,
        })
    }

    fn with_policy(policy: Policy) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .user_agent("feedsafe-poller")
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            DefaultConnector::new(),
            GuardedResolver {
                inner: DefaultResolver::default(),
                policy,
            },
        );
        Self { agent, policy }
    }
}

impl Default for HttpExportSource {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a request was not sent. Logged; the caller sees [`FetchError::Refused`] only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Refusal {
    #[error("export URL {0:?} is not an absolute http(s) URL")]
    NotAUrl(String),
    #[error("scheme {0} is not allowed (https only)")]
    Scheme(String),
    #[error("host {0} is not in the connector's allowed_hosts")]
    NotAllowedHost(String),
    #[error("{host} resolves to {address}, which is not a public address")]
    Address { host: String, address: IpAddr },
    #[error("redirect from {from} to {to} leaves the export's scheme, host and port")]
    OtherHost { from: String, to: String },
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

impl Policy {
    /// The URL's own checks: scheme, allowed hosts, and a literal address in the host.
    fn check_url(&self, url: &str, settings: &PullSettings) -> Result<Uri, Refusal> {
        let uri: Uri = url.parse().map_err(|_| Refusal::NotAUrl(url.to_owned()))?;
        let (Some(scheme), Some(host)) = (uri.scheme_str(), uri.host()) else {
            return Err(Refusal::NotAUrl(url.to_owned()));
        };
        match scheme {
            "https" => {}
            "http" if self.loopback_http => {}
            other => return Err(Refusal::Scheme(other.to_owned())),
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if !settings.allowed_hosts.is_empty()
            && !settings
                .allowed_hosts
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(host))
        {
            return Err(Refusal::NotAllowedHost(host.to_owned()));
        }
        if let Ok(address) = host.parse::<IpAddr>() {
            self.check_address(host, address)?;
        }
        Ok(uri)
    }

    fn check_address(&self, host: &str, address: IpAddr) -> Result<(), Refusal> {
        if is_public(address) || (self.loopback_http && to_canonical(address).is_loopback()) {
            Ok(())
        } else {
            Err(Refusal::Address {
                host: host.to_owned(),
                address,
            })
        }
    }
}

/// The resolver of the poller's agent: the system resolver, then every address checked. A
/// host with one refused address is refused as a whole (no falling back to "the public one").
#[derive(Debug)]
struct GuardedResolver {
    inner: DefaultResolver,
    policy: Policy,
}

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addresses = self.inner.resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or_default();
        for address in addresses.iter() {
            self.policy
                .check_address(host, address.ip())
                .map_err(|refusal| ureq::Error::Other(Box::new(refusal)))?;
        }
        Ok(addresses)
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`; anything else as it is.
fn to_canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Whether `address` is a public unicast address: not unspecified, loopback, private,
/// shared (100.64.0.0/10), link-local (169.254.0.0/16 holds the instance metadata service),
/// IETF protocol assignments (192.0.0.0/24), documentation, benchmarking, multicast,
/// reserved or broadcast; for IPv6 not unique-local (fc00::/7, where `fd00:ec2::254` is the
/// metadata service), link-local, site-local or multicast, and an address that embeds an IPv4
/// one (mapped, compatible, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by that one.
pub fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || a == 0
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || ip.is_documentation()
        || (a == 198 && (b == 18 || b == 19))
        || ip.is_multicast()
        || a >= 240
        || ip.is_broadcast())
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let embedded = |high: usize| {
        let [a, b] = segments[high].to_be_bytes();
        let [c, d] = segments[high + 1].to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    if segments[..6] == [0; 6] {
        // IPv4-compatible (deprecated), `::` and `::1` included.
        return !ip.is_unspecified() && !ip.is_loopback() && is_public_v4(embedded(6));
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded(6));
    }
    if segments[0] == 0x2002 {
        return is_public_v4(embedded(1));
    }
    let first = segments[0];
    !((first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        || (first & 0xff00) == 0xff00
        || (first == 0x2001 && segments[1] == 0x0db8))
}

/// Where a 3xx points, resolved against the URL that answered it.
fn redirect_target(current: &Uri, location: &str) -> Option<String> {
    if location.starts_with("//") {
        return Some(format!("{}:{location}", current.scheme_str()?));
    }
    if location.starts_with('/') {
        return Some(format!(
            "{}://{}{location}",
            current.scheme_str()?,
            current.authority()?
        ));
    }
    location.parse::<Uri>().ok()?.scheme()?;
    Some(location.to_owned())
}

fn same_origin(a: &Uri, b: &Uri) -> bool {
    a.scheme() == b.scheme() && a.host() == b.host() && a.port_u16() == b.port_u16()
}

enum Failure {
    Refused(Refusal),
    Fetch(FetchError),
    /// A transport failure, with the detail for the log.
    Transport(String),
}

impl HttpExportSource {
    fn fetch_blocking(&self, settings: &PullSettings, page: u32) -> Result<Vec<u8>, Failure> {
        let timeout = Duration::from_millis(settings.page_timeout_ms.max(1));
        let start = self
            .policy
            .check_url(&settings.export_url, settings)
            .map_err(Failure::Refused)?;
        let mut current = start.clone();
        let mut url = settings.export_url.clone();
        let mut first = true;
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self.agent.get(&url);
            if first {
                request = request.query("page", page.to_string());
            }
            let mut response = request
                .config()
                .timeout_global(Some(timeout))
                .build()
                .call()
                .map_err(request_failure)?;
            let status = response.status().as_u16();
            if (300..400).contains(&status) {
                let location = response
                    .headers()
                    .get("location")
                    .and_then(|l| l.to_str().ok())
                    .ok_or(Failure::Fetch(FetchError::Status(status)))?;
                let (next_uri, next) =
                    self.redirect(settings, &start, &current, location, status)?;
                current = next_uri;
                url = next;
                first = false;
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(Failure::Fetch(FetchError::Status(status)));
            }
            return response
                .body_mut()
                .with_config()
                .limit(MAX_EXPORT_PAGE_BYTES)
                .read_to_vec()
                .map_err(|e| match e {
                    ureq::Error::BodyExceedsLimit(_) => {
                        Failure::Fetch(FetchError::TooLarge(MAX_EXPORT_PAGE_BYTES))
                    }
                    other => Failure::Transport(other.to_string()),
                });
        }
        Err(Failure::Refused(Refusal::TooManyRedirects))
    }
}

#[async_trait]
impl ExportSource for HttpExportSource {
    async fn fetch_page(&self, settings: &PullSettings, page: u32) -> Result<Vec<u8>, FetchError> {
        let source = self.clone();
        let owned = settings.clone();
        let result = tokio::task::spawn_blocking(move || source.fetch_blocking(&owned, page)).await;
        joined(result).map_err(|failure| reported(failure, &format!("export page {page}")))
    }
}

impl HttpExportSource {
    /// Where a redirect answering `current` with `location` leads: an address the guards allow,
    /// on the origin the request started at (`start`); refused otherwise, nothing sent.
    fn redirect(
        &self,
        settings: &PullSettings,
        start: &Uri,
        current: &Uri,
        location: &str,
        status: u16,
    ) -> Result<(Uri, String), Failure> {
        let next =
            redirect_target(current, location).ok_or(Failure::Fetch(FetchError::Status(status)))?;
        let next_uri = self
            .policy
            .check_url(&next, settings)
            .map_err(Failure::Refused)?;
        if !same_origin(start, &next_uri) {
            return Err(Failure::Refused(Refusal::OtherHost {
                from: current.to_string(),
                to: next,
            }));
        }
        Ok((next_uri, next))
    }
}

/// A request that got no answer: refused by the address guards (nothing was sent), or a
/// transport failure.
fn request_failure(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Other(inner) => match inner.downcast::<Refusal>() {
            Ok(refusal) => Failure::Refused(*refusal),
            Err(other) => Failure::Transport(other.to_string()),
        },
        other => Failure::Transport(other.to_string()),
    }
}

/// A blocking request's result, its task's failure as a transport failure.
fn joined<T>(result: Result<Result<T, Failure>, tokio::task::JoinError>) -> Result<T, Failure> {
    result
        .map_err(|e| Failure::Transport(format!("fetch task failed: {e}")))
        .and_then(|r| r)
}

/// What the caller sees of a failed request to `at` (an export page, a URL): the reason is
/// logged, never returned (an ops caller must not learn what the network looks like inside).
fn reported(failure: Failure, at: &str) -> FetchError {
    match failure {
        Failure::Refused(refusal) => {
            warn!(at, reason = %refusal, "request refused; nothing was sent");
            FetchError::Refused
        }
        Failure::Transport(detail) => {
            warn!(at, detail = %detail, "request failed");
            FetchError::Transport
        }
        Failure::Fetch(error) => error,
    }
}

mod paged_fetch;

#[cfg(test)]
mod tests;
