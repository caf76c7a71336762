//! Finding a secret in text in any of the forms a server may write it in: raw, JSON-
//! or JavaScript-escaped (`\/`, `\u002F` in either case, a surrogate pair, backslashes
//! doubled by a second escaping), URL-encoded (`%2F` in either case, `%252F` encoded
//! twice, `+` for a space) or as an HTML character reference (`&#47;`, `&#x2f;`), each
//! character of the secret in any of them independently.
//!
//! Decoding one of these forms gives the raw secret, so cutting every form out of the
//! raw bytes leaves nothing a decoder can turn back into it.

/// The byte ranges of `text` that spell `secret` in some form, in order and not
/// overlapping (the longest spelling at the leftmost start wins). An empty secret has
/// none.
pub(super) fn occurrences(text: &[u8], secret: &str) -> Vec<(usize, usize)> {
    let chars: Vec<char> = secret.chars().collect();
    let Some(&first) = chars.first() else {
        return Vec::new();
    };
    let lead = lead_byte(first);
    // What the second character's spelling can start with (see below).
    let second = chars.get(1).map(|&c| (lead_byte(c), c == ' '));
    let mut found = Vec::new();
    // Scratch sets of positions, reused: a large body has many candidate starts.
    let (mut ends, mut next) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at < text.len() {
        let b = text[at];
        // Every form of a character starts with its own first byte or one of these.
        let escape = matches!(b, b'\\' | b'%' | b'&') || (b == b'+' && first == ' ');
        let may_start = if b == lead && !escape && first.len_utf8() == 1 {
            // Only the raw form starts with a plain byte, and it is one byte long: the
            // second character's spelling must start right after it. A cheap look at
            // that byte skips most places where the first letter merely occurs.
            match second {
                None => true,
                Some((lead2, space)) => text.get(at + 1).is_some_and(|&n| {
                    n == lead2 || matches!(n, b'\\' | b'%' | b'&') || (n == b'+' && space)
                }),
            }
        } else {
            b == lead || escape
        };
        match may_start
            .then(|| spelled_at(text, at, &chars, &mut ends, &mut next))
            .flatten()
        {
            Some(end) => {
                found.push((at, end));
                at = end;
            }
            None => at += 1,
        }
    }
    found
}

/// The first byte of `c`'s UTF-8.
fn lead_byte(c: char) -> u8 {
    let mut buf = [0u8; 4];
    c.encode_utf8(&mut buf).as_bytes()[0]
}

/// The most backslashes an escape may start with: a text escaped three times over.
const MAX_BACKSLASHES: usize = 8;

/// The most times a `%` may itself be percent-encoded (`%25`) before its hex digits.
const MAX_REENCODINGS: usize = 3;

/// Where the longest spelling of `chars` starting at `at` ends, if there is one
/// (`ends` and `next` are scratch space).
fn spelled_at(
    text: &[u8],
    at: usize,
    chars: &[char],
    ends: &mut Vec<usize>,
    next: &mut Vec<usize>,
) -> Option<usize> {
    ends.clear();
    ends.push(at);
    for &c in chars {
        next.clear();
        for &p in ends.iter() {
            forms_of(text, p, c, next);
        }
        if next.is_empty() {
            return None;
        }
        next.sort_unstable();
        next.dedup();
        std::mem::swap(ends, next);
    }
    ends.last().copied()
}

/// Pushes onto `ends` where each spelling of `c` starting at `at` ends.
fn forms_of(text: &[u8], at: usize, c: char, ends: &mut Vec<usize>) {
    let rest = &text[at..];
    let mut buf = [0u8; 4];
    let utf8 = c.encode_utf8(&mut buf).as_bytes();
    if rest.starts_with(utf8) {
        ends.push(at + utf8.len());
    }
    if c == ' ' && rest.first() == Some(&b'+') {
        ends.push(at + 1);
    }
    escaped(text, at, c, ends);
    if let Some(end) = percent_encoded(text, at, utf8) {
        ends.push(end);
    }
    if let Some(end) = character_reference(text, at, c) {
        ends.push(end);
    }
}

/// A backslash escape of `c` at `at`: one or more backslashes, up to
/// [`MAX_BACKSLASHES`] (a text escaped twice doubles them), then its short escape (`/`, `"`, `n`, …), `u` and four hex digits
/// (for a character past U+FFFF, two such escapes: its surrogate pair) or `x` and two.
fn escaped(text: &[u8], at: usize, c: char, ends: &mut Vec<usize>) {
    let run = backslashes(text, at);
    if run == 0 {
        return;
    }
    let after = at + run;
    if c == '\\' {
        // `\\` escapes a backslash; any longer run is it escaped again.
        if run >= 2 {
            ends.extend(at + 2..=after);
        }
    }
    let short = match c {
        '/' | '"' | '\'' => Some(c as u8),
        '\u{8}' => Some(b'b'),
        '\u{c}' => Some(b'f'),
        '\n' => Some(b'n'),
        '\r' => Some(b'r'),
        '\t' => Some(b't'),
        _ => None,
    };
    if short.is_some() && text.get(after).copied() == short {
        ends.push(after + 1);
    }
    let code = c as u32;
    match (text.get(after), hex(text, after + 1, 4)) {
        (Some(b'u'), Some(unit)) if unit == code => ends.push(after + 5),
        (Some(b'u'), Some(high)) if code > 0xFFFF => {
            let (want_high, want_low) = surrogates(code);
            let second = after + 5;
            let run = backslashes(text, second);
            if high == want_high
                && run > 0
                && text.get(second + run) == Some(&b'u')
                && hex(text, second + run + 1, 4) == Some(want_low)
            {
                ends.push(second + run + 5);
            }
        }
        (Some(b'x'), _) if code < 0x100 && hex(text, after + 1, 2) == Some(code) => {
            ends.push(after + 3);
        }
        _ => {}
    }
}

/// `c`'s UTF-8 bytes percent-encoded at `at`, each `%` followed by its two hex digits,
/// or by `25` up to [`MAX_REENCODINGS`] times first (the `%` itself encoded again).
fn percent_encoded(text: &[u8], at: usize, utf8: &[u8]) -> Option<usize> {
    let mut p = at;
    for &byte in utf8 {
        if text.get(p) != Some(&b'%') {
            return None;
        }
        let mut q = p + 1;
        let mut again = 0;
        loop {
            match hex(text, q, 2) {
                Some(v) if v == u32::from(byte) => break,
                Some(0x25) if again < MAX_REENCODINGS => {
                    q += 2;
                    again += 1;
                }
                _ => return None,
            }
        }
        p = q + 2;
    }
    Some(p)
}

/// An HTML character reference to `c` at `at`: `&#` and decimal digits, or `&#x` and
/// hex digits, then `;`.
fn character_reference(text: &[u8], at: usize, c: char) -> Option<usize> {
    let rest = text.get(at..)?;
    let rest = rest.strip_prefix(b"&#")?;
    let (radix, digits, skip) = match rest.first() {
        Some(b'x' | b'X') => (16, &rest[1..], 3),
        _ => (10, rest, 2),
    };
    let len = digits
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if len == 0 || len > 8 || digits.get(len) != Some(&b';') {
        return None;
    }
    let value = u32::from_str_radix(std::str::from_utf8(&digits[..len]).ok()?, radix).ok()?;
    (value == c as u32).then_some(at + skip + len + 1)
}

/// How many backslashes start at `at`, counting at most [`MAX_BACKSLASHES`] (so a long
/// run costs no more than a short one at each of its positions).
fn backslashes(text: &[u8], at: usize) -> usize {
    text.get(at..).map_or(0, |rest| {
        rest.iter()
            .take(MAX_BACKSLASHES)
            .take_while(|&&b| b == b'\\')
            .count()
    })
}

/// The value of the `len` hex digits (either case) at `at`, if they are all there.
fn hex(text: &[u8], at: usize, len: usize) -> Option<u32> {
    let digits = text.get(at..at + len)?;
    digits.iter().try_fold(0u32, |value, &d| {
        char::from(d).to_digit(16).map(|v| value * 16 + v)
    })
}

/// The UTF-16 surrogate pair of a character past U+FFFF.
fn surrogates(code: u32) -> (u32, u32) {
    let v = code - 0x1_0000;
    (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
}
