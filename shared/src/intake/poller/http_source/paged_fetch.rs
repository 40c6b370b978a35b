//! [`PageSource`] over the same guarded client: a defined pull's pages are fetched by URL
//! (the pager builds it), with the credential header, under every rule of this module's parent
//! (scheme, allowed hosts, public addresses checked at connect time, same-origin redirects,
//! the body cap, the page timeout). A status outside 2xx is answered, not an error, so that the
//! caller can read its `Retry-After`; the credential is never logged.

use super::{Failure, HttpExportSource, Refusal, MAX_REDIRECTS};
use crate::domain::connector::PullSettings;
use crate::intake::poller::credentials::Secret;
use crate::intake::poller::paged::{PageResponse, PageSource};
use crate::intake::poller::{FetchError, MAX_EXPORT_PAGE_BYTES};
use async_trait::async_trait;
use std::time::Duration;
use ureq::http::Uri;

/// The first value of `name` in `response`'s headers, if it is text.
fn header_text<B>(response: &ureq::http::Response<B>, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

impl HttpExportSource {
    fn fetch_url_blocking(
        &self,
        settings: &PullSettings,
        url: &str,
        headers: &[(String, Secret)],
        identity_header: Option<&str>,
    ) -> Result<PageResponse, Failure> {
        let timeout = Duration::from_millis(settings.page_timeout_ms.max(1));
        let start = self
            .policy
            .check_url(url, settings)
            .map_err(Failure::Refused)?;
        let mut current: Uri = start.clone();
        let mut url = url.to_owned();
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self.agent.get(&url);
            for (name, value) in headers {
                request = request.header(name.as_str(), value.expose());
            }
            let mut response = request
                .config()
                .timeout_global(Some(timeout))
                .build()
                .call()
                .map_err(super::request_failure)?;
            let status = response.status().as_u16();
            if (300..400).contains(&status) {
                let location = header_text(&response, "location")
                    .ok_or(Failure::Fetch(FetchError::Status(status)))?;
                let (next_uri, next) =
                    self.redirect(settings, &start, &current, &location, status)?;
                current = next_uri;
                url = next;
                continue;
            }
            let mut page = PageResponse {
                status,
                body: Vec::new(),
                link: header_text(&response, "link"),
                retry_after: header_text(&response, "retry-after"),
                content_type: header_text(&response, "content-type"),
                identity_header: identity_header.and_then(|name| header_text(&response, name)),
            };
            if (200..300).contains(&status) {
                page.body = response
                    .body_mut()
                    .with_config()
                    .limit(MAX_EXPORT_PAGE_BYTES)
                    .read_to_vec()
                    .map_err(|e| match e {
                        ureq::Error::BodyExceedsLimit(_) => {
                            Failure::Fetch(FetchError::TooLarge(MAX_EXPORT_PAGE_BYTES))
                        }
                        other => Failure::Transport(other.to_string()),
                    })?;
            }
            return Ok(page);
        }
        Err(Failure::Refused(Refusal::TooManyRedirects))
    }
}

#[async_trait]
impl PageSource for HttpExportSource {
    async fn fetch_url(
        &self,
        settings: &PullSettings,
        url: &str,
        headers: &[(String, Secret)],
        identity_header: Option<&str>,
    ) -> Result<PageResponse, FetchError> {
        let source = self.clone();
        let (owned, target) = (settings.clone(), url.to_owned());
        let headers = headers.to_vec();
        let identity_header = identity_header.map(str::to_owned);
        let result = tokio::task::spawn_blocking(move || {
            source.fetch_url_blocking(&owned, &target, &headers, identity_header.as_deref())
        })
        .await;
        super::joined(result).map_err(|failure| super::reported(failure, url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    /// A one-answer HTTP server on 127.0.0.1; keeps the requests it read.
    fn serve(answer: String) -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut request = [0u8; 4096];
                let read = stream.read(&mut request).unwrap_or(0);
                let text = String::from_utf8_lossy(&request[..read]).into_owned();
                seen.lock().unwrap().push(text);
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        (port, requests)
    }

    fn settings(url: &str) -> PullSettings {
        serde_json::from_value(serde_json::json!({
            "export_url": url, "credential_ref": "", "page_timeout_ms": 2000
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn the_credential_is_sent_and_retry_after_and_link_come_back() {
        let (port, requests) = serve(
            "HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\nlink: </x?p=2>; rel=\"next\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                .to_owned(),
        );
        let url = format!("http://127.0.0.1:{port}/x?p=1");
        let headers = [(
            "authorization".to_owned(),
            Secret::new("Bearer local-sample"),
        )];
        let source = HttpExportSource::allowing_loopback_http();
        let page = source
            .fetch_url(&settings(&url), &url, &headers, None)
            .await
            .unwrap();
        assert_eq!(page.status, 429);
        assert_eq!(page.retry_after.as_deref(), Some("7"));
        assert_eq!(page.link.as_deref(), Some("</x?p=2>; rel=\"next\""));
        let sent = requests.lock().unwrap().join("\n").to_ascii_lowercase();
        assert!(
            sent.contains("authorization: bearer local-sample"),
            "{sent}"
        );
    }

    #[tokio::test]
    async fn the_deployed_client_sends_nothing_to_loopback() {
        let (port, requests) = serve("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned());
        for url in [
            format!("http://127.0.0.1:{port}/x"),
            format!("https://127.0.0.1:{port}/x"),
        ] {
            let result = HttpExportSource::new()
                .fetch_url(&settings(&url), &url, &[], None)
                .await;
            assert_eq!(result, Err(FetchError::Refused), "{url}");
        }
        assert!(requests.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_redirect_off_the_origin_is_not_followed() {
        let (inside, reached) = serve("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned());
        let (port, _) = serve(format!(
            "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{inside}/secret\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ));
        let url = format!("http://127.0.0.1:{port}/x");
        let result = HttpExportSource::allowing_loopback_http()
            .fetch_url(&settings(&url), &url, &[], None)
            .await;
        assert_eq!(result, Err(FetchError::Refused));
        assert!(reached.lock().unwrap().is_empty());
    }
}
