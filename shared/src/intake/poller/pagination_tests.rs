use super::*;
use crate::domain::definition::Pagination;

fn facts<'a>(body: &'a [u8], link: Option<&'a str>, rows: Option<usize>) -> PageFacts<'a> {
    PageFacts {
        body,
        link,
        rows,
        page_count: None,
    }
}

#[test]
fn link_header_forms() {
    let next = |h: &str| link_next(h);
    assert_eq!(
        next(r#"<https://a.example/v1/items?page=2>; rel="next""#).as_deref(),
        Some("https://a.example/v1/items?page=2")
    );
    // Several links, next not first, unquoted and upper-case rel, extra parameters.
    assert_eq!(
        next(r#"<https://a.example/x?p=1>; rel="prev", <https://a.example/x?p=3>; title="n, 3"; REL=Next"#)
            .as_deref(),
        Some("https://a.example/x?p=3")
    );
    // A rel listing several relation types; a comma inside the target.
    assert_eq!(
        next(r#"</x?ids=1,2&p=2>; rel="next last""#).as_deref(),
        Some("/x?ids=1,2&p=2")
    );
    assert_eq!(next(r#"<https://a.example/x?p=1>; rel="prev""#), None);
    assert_eq!(next(r#"<https://a.example/x?p=1>; rel="nextpage""#), None);
    assert_eq!(next(""), None);
    assert_eq!(next("<unterminated; rel=next"), None);
    assert_eq!(next(r#"<>; rel="next""#), None);
}

#[test]
fn relative_targets_resolve_against_the_current_url() {
    let current: Uri = "http://127.0.0.1:8080/api/v1/items?page=1".parse().unwrap();
    for (reference, expected) in [
        (
            "/api/v1/items?page=2",
            "http://127.0.0.1:8080/api/v1/items?page=2",
        ),
        ("?page=2", "http://127.0.0.1:8080/api/v1/items?page=2"),
        ("items?page=2", "http://127.0.0.1:8080/api/v1/items?page=2"),
        ("//127.0.0.1:8080/z", "http://127.0.0.1:8080/z"),
        ("https://other.example/z", "https://other.example/z"),
    ] {
        assert_eq!(
            resolve(&current, reference).as_deref(),
            Some(expected),
            "{reference}"
        );
    }
    assert_eq!(resolve(&current, "/a b"), None);
}

#[test]
fn a_next_url_of_another_origin_is_refused() {
    let pagination = Pagination::LinkHeader;
    let mut pager = Pager::new("https://api.example.com/v2/stock", &pagination).unwrap();
    let first = pager.first();
    assert_eq!(first.url, "https://api.example.com/v2/stock");
    for other in [
        "https://evil.example.com/v2/stock?p=2",
        "http://api.example.com/v2/stock?p=2",
        "https://api.example.com:8443/v2/stock?p=2",
        "http://169.254.169.254/latest/meta-data/",
    ] {
        let link = format!("<{other}>; rel=\"next\"");
        let stop = pager
            .clone()
            .next(&first, &facts(b"{}", Some(&link), Some(1)));
        assert_eq!(stop, Err(Stop::OtherOrigin), "{other}");
    }
    // The default port written out and a host in another case are the same origin.
    let link = r#"<https://API.example.com:443/v2/stock?p=2>; rel="next""#;
    let next = pager
        .next(&first, &facts(b"{}", Some(link), Some(1)))
        .unwrap();
    assert_eq!(next.sequence, 2);

    let pagination = Pagination::NextUrl {
        path: "$.links.next".into(),
    };
    let mut pager = Pager::new("https://api.example.com/v2/stock", &pagination).unwrap();
    let first = pager.first();
    let body = br#"{"links":{"next":"https://elsewhere.example/v2/stock?p=2"}}"#;
    assert_eq!(
        pager.next(&first, &facts(body, None, Some(1))),
        Err(Stop::OtherOrigin)
    );
}

#[test]
fn a_repeated_cursor_or_url_ends_the_pull() {
    let pagination = Pagination::Cursor {
        path: "$.meta.next_cursor".into(),
        param: "cursor".into(),
    };
    let mut pager = Pager::new("https://api.example.com/v2/inventory", &pagination).unwrap();
    let first = pager.first();
    assert_eq!(first.asked_with, "");
    let body = br#"{"meta":{"next_cursor":"c 2/+"}}"#;
    let second = pager.next(&first, &facts(body, None, Some(2))).unwrap();
    assert_eq!(
        second.url,
        "https://api.example.com/v2/inventory?cursor=c%202%2F%2B"
    );
    assert_eq!(second.asked_with, "c 2/+");
    // The supplier names the same cursor again.
    assert_eq!(
        pager.next(&second, &facts(body, None, Some(2))),
        Err(Stop::Repeated)
    );
    // Absent, null and empty cursors end the pull as its last page.
    for body in [
        &br#"{"meta":{}}"#[..],
        br#"{"meta":{"next_cursor":null}}"#,
        br#"{"meta":{"next_cursor":""}}"#,
        b"not json",
    ] {
        let mut pager = Pager::new("https://api.example.com/v2/inventory", &pagination).unwrap();
        let first = pager.first();
        assert_eq!(
            pager.next(&first, &facts(body, None, Some(1))),
            Err(Stop::LastPage)
        );
    }

    let mut pager = Pager::new("https://a.example/x", &Pagination::LinkHeader).unwrap();
    let first = pager.first();
    let link = r#"<https://a.example/x>; rel="next""#;
    assert_eq!(
        pager.next(&first, &facts(b"", Some(link), Some(1))),
        Err(Stop::Repeated)
    );
}

#[test]
fn page_numbers_and_offsets_stop_on_short_or_empty_pages() {
    let pagination = Pagination::PageNumber {
        param: "p".into(),
        first: 0,
    };
    let mut pager = Pager::new("https://a.example/x?format=csv", &pagination).unwrap();
    let first = pager.first();
    assert_eq!(first.url, "https://a.example/x?format=csv&p=0");
    let second = pager.next(&first, &facts(b"", None, Some(3))).unwrap();
    assert_eq!(
        (second.sequence, second.url.as_str()),
        (2, "https://a.example/x?format=csv&p=1")
    );
    assert_eq!(
        pager.next(&second, &facts(b"", None, Some(0))),
        Err(Stop::EmptyPage)
    );
    let mut with_count = facts(b"", None, Some(3));
    with_count.page_count = Some(2);
    assert_eq!(
        pager.next(&second, &with_count),
        Err(Stop::PageCountReached)
    );
    assert_eq!(
        pager.next(&second, &facts(b"", None, None)),
        Err(Stop::Uncountable)
    );

    let pagination = Pagination::OffsetLimit {
        offset_param: "offset".into(),
        limit_param: "limit".into(),
        limit: 2,
    };
    let mut pager = Pager::new("https://a.example/x", &pagination).unwrap();
    let first = pager.first();
    assert_eq!(first.url, "https://a.example/x?offset=0&limit=2");
    let second = pager.next(&first, &facts(b"", None, Some(2))).unwrap();
    assert_eq!(second.url, "https://a.example/x?offset=2&limit=2");
    assert_eq!(second.asked_with, "offset=2&limit=2");
    assert_eq!(
        pager.next(&second, &facts(b"", None, Some(1))),
        Err(Stop::ShortPage)
    );
    assert_eq!(
        pager.next(&second, &facts(b"", None, Some(0))),
        Err(Stop::EmptyPage)
    );
}

#[test]
fn the_page_limit_holds() {
    let mut pager = Pager::new("https://a.example/x", &Pagination::LinkHeader).unwrap();
    let mut last = pager.first();
    last.sequence = MAX_EXPORT_PAGES;
    let link = r#"<https://a.example/x?p=new>; rel="next""#;
    assert_eq!(
        pager.next(&last, &facts(b"", Some(link), Some(1))),
        Err(Stop::PageLimit)
    );
}

#[test]
fn retry_after_forms() {
    let now = Timestamp::parse("2026-12-07T08:00:00Z").unwrap();
    assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
    assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
    assert_eq!(
        retry_after("Mon, 07 Dec 2026 08:00:30 GMT", now),
        Some(Duration::from_secs(30))
    );
    // A date already past: no wait.
    assert_eq!(
        retry_after("Mon, 07 Dec 2026 07:59:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(retry_after("-5", now), None);
    assert_eq!(retry_after("soon", now), None);
    assert_eq!(retry_after("", now), None);
    assert_eq!(
        retry_after("99999999999999999999999", now),
        Some(Duration::from_secs(u64::MAX))
    );
}
