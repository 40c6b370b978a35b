//! The operator console: one page and its script and style, embedded in the binary (no CDN,
//! nothing downloaded at run time; it works offline). The page holds no secret and no data:
//! the operator's bearer token is typed into it, kept in the page's memory only, and sent with
//! every call it makes to the ops routes, which check it as they check any caller's.
//!
//! Supplier strings are untrusted: the script builds every element with `textContent` (never
//! `innerHTML`), and the Content-Security-Policy below allows only this origin's script and
//! style, no inline script, no framing, no form posts elsewhere.

use crate::protocols::http::HttpResponse;

/// The console's Content-Security-Policy: its own script, style and API calls; nothing else.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// Where the console is served (the ops function's route, and the local stack's).
pub const CONSOLE_PATH: &str = "/console";

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");
const ICON: &str = include_str!("favicon.svg");

/// The headers every console answer carries beside its content type and `no-store`.
const HEADERS: &[(&str, &str)] = &[
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
];

/// The console's answer to `method path`, or `None` when the path is not the console's.
pub fn serve(method: &str, path: &str) -> Option<HttpResponse> {
    let rest = path.strip_prefix(CONSOLE_PATH)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    if method != "GET" {
        return Some(HttpResponse::error(
            405,
            "method_not_allowed",
            "the console accepts GET only",
        ));
    }
    let (content_type, body) = match rest {
        "" | "/" | "/index.html" => ("text/html; charset=utf-8", PAGE),
        "/console.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/console.css" => ("text/css; charset=utf-8", STYLE),
        "/favicon.svg" => ("image/svg+xml", ICON),
        _ => {
            return Some(HttpResponse::error(
                404,
                "not_found",
                "the console has no such asset",
            ))
        }
    };
    let mut response = HttpResponse::text(200, content_type, body.to_owned());
    response.headers = HEADERS.to_vec();
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_assets_carry_the_policy_and_nothing_else_is_served() {
        for (path, kind) in [
            ("/console", "text/html"),
            ("/console/", "text/html"),
            ("/console/console.js", "text/javascript"),
            ("/console/console.css", "text/css"),
            ("/console/favicon.svg", "image/svg+xml"),
        ] {
            let r = serve("GET", path).expect("a console path");
            assert_eq!(r.status, 200, "{path}");
            assert!(
                r.content_type.starts_with(kind),
                "{path}: {}",
                r.content_type
            );
            assert!(r
                .headers
                .contains(&("content-security-policy", CONTENT_SECURITY_POLICY)));
        }
        assert_eq!(
            serve("GET", "/console/../v1/quarantine").map(|r| r.status),
            Some(404)
        );
        assert_eq!(serve("POST", "/console").map(|r| r.status), Some(405));
        assert!(serve("GET", "/consoles").is_none());
        assert!(serve("GET", "/v1/quarantine").is_none());
    }

    #[test]
    fn the_page_loads_no_inline_script_and_the_script_never_parses_markup() {
        assert!(PAGE.contains(r#"<script src="/console/console.js""#));
        assert_eq!(PAGE.matches("<script").count(), 1, "one external script");
        assert!(
            !PAGE.contains("style="),
            "no inline style (the policy forbids it)"
        );
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!SCRIPT.contains(sink), "the script uses {sink}");
        }
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }
}
