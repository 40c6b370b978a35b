use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A one-route HTTP server on 127.0.0.1 answering every request with `answer` (status line
/// and headers, `{port}` replaced by its own port), counting the connections it accepted.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn start(answer: impl Fn(u16) -> String + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(answer(port).as_bytes());
            }
        });
        Self { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn redirect_to(location: String) -> impl Fn(u16) -> String + Send + 'static {
    move |_| {
        format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    }
}

fn export_ok(_: u16) -> String {
    let body = r#"{"export_id":"EXP-1","page":1,"page_count":1,"offers":[]}"#;
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn settings(url: String) -> PullSettings {
    serde_json::from_value(serde_json::json!({
        "export_url": url, "credential_ref": "test/none", "page_timeout_ms": 2000
    }))
    .unwrap()
}

async fn fetch(source: &HttpExportSource, url: String) -> Result<Vec<u8>, FetchError> {
    source.fetch_page(&settings(url), 1).await
}

/// The supplier (here on loopback, which only the local stack's client reaches) answers with a
/// redirect to another port of 127.0.0.1: a different host, not followed, never contacted.
#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed() {
    let inside = Server::start(export_ok);
    let supplier = Server::start(redirect_to(format!(
        "http://127.0.0.1:{}/secret",
        inside.port
    )));
    let source = HttpExportSource::allowing_loopback_http();
    let result = fetch(
        &source,
        format!("http://127.0.0.1:{}/export", supplier.port),
    )
    .await;
    assert_eq!(supplier.hits(), 1, "{result:?}");
    assert_eq!(
        inside.hits(),
        0,
        "the redirect target was contacted: {result:?}"
    );
    assert_eq!(result, Err(FetchError::Refused));
}

/// A redirect to the instance metadata service (link-local) is refused before any
/// connection is tried; so is one to its IPv6 form and to a private address.
#[tokio::test]
async fn a_redirect_to_a_link_local_or_private_address_is_refused() {
    for target in [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://10.0.0.1/admin",
        "https://169.254.169.254/",
    ] {
        let supplier = Server::start(redirect_to(target.to_owned()));
        let source = HttpExportSource::allowing_loopback_http();
        let started = std::time::Instant::now();
        let result = fetch(
            &source,
            format!("http://127.0.0.1:{}/export", supplier.port),
        )
        .await;
        assert_eq!(result, Err(FetchError::Refused), "{target}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{target}: refused, not timed out"
        );
    }
}

/// A redirect within the export's own origin is followed (a supplier moving its export path).
#[tokio::test]
async fn a_redirect_within_the_same_host_is_followed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let supplier = Server::start(move |port| {
        // First the redirect, then (second connection) the page.
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            redirect_to(format!("http://127.0.0.1:{port}/v2/export?page=1"))(port)
        } else {
            export_ok(port)
        }
    });
    let source = HttpExportSource::allowing_loopback_http();
    let body = fetch(
        &source,
        format!("http://127.0.0.1:{}/export", supplier.port),
    )
    .await
    .unwrap();
    assert!(body.starts_with(b"{\"export_id\""));
    assert_eq!(supplier.hits(), 2);
}

/// The deployed client sends nothing to loopback, private or link-local addresses (literal or
/// resolved, e.g. `localhost`), nor over plain http; the caller learns only a generic reason.
#[tokio::test]
async fn the_deployed_client_sends_nothing_inside_the_network() {
    let local = Server::start(export_ok);
    let source = HttpExportSource::new();
    for url in [
        format!("https://127.0.0.1:{}/export", local.port),
        format!("https://localhost:{}/export", local.port),
        format!("https://[::ffff:127.0.0.1]:{}/export", local.port),
        format!("http://127.0.0.1:{}/export", local.port),
        "http://supplier.example/export".to_owned(),
        "https://169.254.169.254/latest/meta-data/".to_owned(),
        "https://192.168.1.10/export".to_owned(),
        "ftp://supplier.example/export".to_owned(),
        "not a url".to_owned(),
    ] {
        let result = fetch(&source, url.clone()).await;
        assert_eq!(result, Err(FetchError::Refused), "{url}");
        let shown = result.unwrap_err().to_string();
        assert!(
            !shown.contains("127.0.0.1") && !shown.contains("169.254"),
            "{shown}"
        );
    }
    assert_eq!(local.hits(), 0, "nothing reached the loopback server");
}

/// A connector's `allowed_hosts` narrows the hosts further, redirects included.
#[tokio::test]
async fn hosts_outside_the_connectors_allowlist_are_refused() {
    let supplier = Server::start(export_ok);
    let source = HttpExportSource::allowing_loopback_http();
    let mut narrowed = settings(format!("http://127.0.0.1:{}/export", supplier.port));
    narrowed.allowed_hosts = vec!["exports.supplier.example".into()];
    assert_eq!(
        source.fetch_page(&narrowed, 1).await,
        Err(FetchError::Refused)
    );
    narrowed.allowed_hosts.push("127.0.0.1".into());
    assert!(source.fetch_page(&narrowed, 1).await.is_ok());
    assert_eq!(supplier.hits(), 1);
}

/// A connection failure reaches the caller as a generic code; the detail stays in the log.
#[tokio::test]
async fn transport_errors_reach_callers_without_details() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let source = HttpExportSource::allowing_loopback_http();
    let result = fetch(&source, format!("http://127.0.0.1:{port}/export")).await;
    assert_eq!(result, Err(FetchError::Transport));
    assert_eq!(
        FetchError::Transport.to_string(),
        "export_unreachable: the export did not answer"
    );
}

#[test]
fn only_public_unicast_addresses_are_public() {
    for private in [
        "0.0.0.0",
        "0.1.2.3",
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.254",
        "192.0.0.192",
        "192.0.2.1",
        "198.18.0.1",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:0a00:0001::1",
        "fd00:ec2::254",
        "fc00::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "2001:db8::1",
    ] {
        let ip: IpAddr = private.parse().unwrap();
        assert!(!is_public(ip), "{private} is not public");
    }
    for public in [
        "1.1.1.1",
        "8.8.8.8",
        "172.32.0.1",
        "100.128.0.1",
        "52.95.110.1",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:0808:0808::1",
    ] {
        let ip: IpAddr = public.parse().unwrap();
        assert!(is_public(ip), "{public} is public");
    }
}
