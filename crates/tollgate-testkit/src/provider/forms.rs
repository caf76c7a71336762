//! The forms a server may quote a secret in, for the secret checks: raw, JSON-escaped
//! (`\/`), `\u`-escaped in either case, and URL-encoded in either case.

/// One way of writing a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// As it is.
    Raw,
    /// Each `/` written `\/`, as JSON encoders that escape slashes do.
    JsonSlash,
    /// Each character other than a letter, a digit or `-` as `\u` and four lower-case hex
    /// digits.
    UnicodeLower,
    /// The same with upper-case hex digits.
    UnicodeUpper,
    /// Each character other than a letter, a digit or `-` percent-encoded, upper-case hex.
    UrlUpper,
    /// The same with lower-case hex digits.
    UrlLower,
}

impl Form {
    /// Every form.
    pub const ALL: [Form; 6] = [
        Form::Raw,
        Form::JsonSlash,
        Form::UnicodeLower,
        Form::UnicodeUpper,
        Form::UrlUpper,
        Form::UrlLower,
    ];

    /// `text` written in this form.
    pub fn write(self, text: &str) -> String {
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-';
        text.chars()
            .map(|c| match self {
                _ if plain(c) => c.to_string(),
                Form::Raw => c.to_string(),
                Form::JsonSlash if c == '/' => "\\/".to_owned(),
                Form::JsonSlash => c.to_string(),
                Form::UnicodeLower => format!("\\u{:04x}", c as u32),
                Form::UnicodeUpper => format!("\\u{:04X}", c as u32),
                Form::UrlUpper | Form::UrlLower => {
                    let mut buf = [0u8; 4];
                    c.encode_utf8(&mut buf)
                        .bytes()
                        .map(|b| match self {
                            Form::UrlUpper => format!("%{b:02X}"),
                            _ => format!("%{b:02x}"),
                        })
                        .collect()
                }
            })
            .collect()
    }
}

/// Where `text` holds `secret` in any [`Form`]: the first byte offset and the form's
/// length, if it does.
pub fn find_secret(text: &str, secret: &str) -> Option<(usize, usize)> {
    Form::ALL.iter().find_map(|form| {
        let written = form.write(secret);
        text.find(&written).map(|at| (at, written.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_writes_the_characters_json_and_urls_escape() {
        let key = "a/b+c=";
        let written: Vec<String> = Form::ALL.iter().map(|f| f.write(key)).collect();
        assert_eq!(
            written,
            [
                "a/b+c=",
                "a\\/b+c=",
                "a\\u002fb\\u002bc\\u003d",
                "a\\u002Fb\\u002Bc\\u003D",
                "a%2Fb%2Bc%3D",
                "a%2fb%2bc%3d",
            ]
        );
    }

    #[test]
    fn a_secret_is_found_in_any_form_and_nothing_else_is() {
        for form in Form::ALL {
            let text = format!("bad key {}!", form.write("k/1+"));
            assert_eq!(
                find_secret(&text, "k/1+").map(|(at, _)| at),
                Some(8),
                "{text}"
            );
        }
        assert_eq!(find_secret("bad key [redacted]", "k/1+"), None);
    }
}
