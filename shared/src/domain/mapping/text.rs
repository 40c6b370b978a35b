//! Text bodies in the encodings a definition may declare: UTF-8 (a leading byte-order mark is
//! dropped), Windows-1252 and ISO-8859-1.
//!
//! Written here rather than taken from `encoding_rs`: the two single-byte encodings are a
//! table of 32 characters and a cast, while that crate carries every encoding of the WHATWG
//! standard (and, following it, reads `iso-8859-1` as Windows-1252, which is not what a
//! supplier declaring Latin-1 sent). Nothing is guessed: bytes an encoding does not define are
//! refused with their offset, never replaced.

use crate::domain::definition::Encoding;
use std::borrow::Cow;

/// Windows-1252's 0x80-0x9F (the rest is ISO-8859-1); `None` where it defines no character.
const WINDOWS_1252_HIGH: [Option<char>; 32] = [
    Some('\u{20AC}'),
    None,
    Some('\u{201A}'),
    Some('\u{0192}'),
    Some('\u{201E}'),
    Some('\u{2026}'),
    Some('\u{2020}'),
    Some('\u{2021}'),
    Some('\u{02C6}'),
    Some('\u{2030}'),
    Some('\u{0160}'),
    Some('\u{2039}'),
    Some('\u{0152}'),
    None,
    Some('\u{017D}'),
    None,
    None,
    Some('\u{2018}'),
    Some('\u{2019}'),
    Some('\u{201C}'),
    Some('\u{201D}'),
    Some('\u{2022}'),
    Some('\u{2013}'),
    Some('\u{2014}'),
    Some('\u{02DC}'),
    Some('\u{2122}'),
    Some('\u{0161}'),
    Some('\u{203A}'),
    Some('\u{0153}'),
    None,
    Some('\u{017E}'),
    Some('\u{0178}'),
];

/// `body` as text in `encoding`, or why not (with the byte offset).
pub fn decode(encoding: Encoding, body: &[u8]) -> Result<Cow<'_, str>, String> {
    match encoding {
        Encoding::Utf8 => {
            let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            std::str::from_utf8(body)
                .map(Cow::Borrowed)
                .map_err(|e| format!("not UTF-8: invalid bytes at byte {}", e.valid_up_to()))
        }
        Encoding::Iso8859_1 => Ok(match std::str::from_utf8(body) {
            Ok(ascii) if body.is_ascii() => Cow::Borrowed(ascii),
            _ => Cow::Owned(single_byte(body, |b, _| Ok(char::from(b)))?),
        }),
        Encoding::Windows1252 => {
            if body.is_ascii() {
                return Ok(Cow::Borrowed(std::str::from_utf8(body).unwrap_or_default()));
            }
            single_byte(body, |b, at| match b {
                0x80..=0x9F => WINDOWS_1252_HIGH[usize::from(b - 0x80)].ok_or_else(|| {
                    format!("not Windows-1252: byte 0x{b:02X} at byte {at} names no character")
                }),
                _ => Ok(char::from(b)),
            })
            .map(Cow::Owned)
        }
    }
}

/// A single-byte encoding's text: runs of ASCII copied as they are, every other byte as the
/// character `high` gives it (or its refusal), with the byte's offset.
fn single_byte(
    body: &[u8],
    high: impl Fn(u8, usize) -> Result<char, String>,
) -> Result<String, String> {
    // Each byte above ASCII is two or three bytes of UTF-8; room for a few of them.
    let mut text = String::with_capacity(body.len() + body.len() / 8);
    let mut at = 0;
    while let Some(rest) = body.get(at..) {
        let ascii = rest
            .iter()
            .position(|b| !b.is_ascii())
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(ascii);
        // A run of ASCII bytes is UTF-8.
        text.push_str(std::str::from_utf8(run).unwrap_or_default());
        at += ascii;
        let Some(&b) = tail.first() else {
            break;
        };
        text.push(high(b, at)?);
        at += 1;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_reads_what_it_defines_and_refuses_the_rest() {
        assert_eq!(
            decode(Encoding::Utf8, b"\xEF\xBB\xBFW\xC3\xA4hrung").unwrap(),
            "Währung"
        );
        assert_eq!(
            decode(Encoding::Utf8, b"ab\xE4").unwrap_err(),
            "not UTF-8: invalid bytes at byte 2"
        );
        assert_eq!(
            decode(Encoding::Windows1252, b"W\xE4hrung \x80 \x9F").unwrap(),
            "Währung € Ÿ"
        );
        assert!(decode(Encoding::Windows1252, b"a\x81")
            .unwrap_err()
            .contains("0x81 at byte 1"));
        assert_eq!(
            decode(Encoding::Iso8859_1, b"W\xE4hrung \x80").unwrap(),
            "Währung \u{80}"
        );
        assert!(matches!(
            decode(Encoding::Windows1252, b"plain").unwrap(),
            Cow::Borrowed(_)
        ));
    }

    /// Every byte of each single-byte encoding, against the code points the standards give
    /// (the undefined five of Windows-1252 refused).
    #[test]
    fn every_byte_decodes_to_its_code_point() {
        for b in 0u8..=255 {
            let byte = [b];
            assert_eq!(
                decode(Encoding::Iso8859_1, &byte).unwrap().chars().next(),
                Some(char::from(b))
            );
            let windows = decode(Encoding::Windows1252, &byte);
            match b {
                0x81 | 0x8D | 0x8F | 0x90 | 0x9D => assert!(windows.is_err()),
                0x80..=0x9F => assert!(windows.unwrap().chars().all(|c| u32::from(c) > 0xFF)),
                _ => assert_eq!(windows.unwrap().chars().next(), Some(char::from(b))),
            }
        }
    }
}
