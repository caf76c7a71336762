//! Connection failures, classified by the error's type: the chain of `source()`s is
//! walked for `std::io::Error` kinds, hyper's and rustls' errors (feature `net`) and
//! the resolver's [`DnsFailure`]; message text is never read.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use crate::error::{ConnectionCause, ProviderError};

/// A host name that did not resolve. The kit's HTTP client resolves names through a
/// resolver that wraps its failures in this type, so that [`connection_cause`] can tell
/// a DNS failure by type.
#[derive(Debug)]
pub struct DnsFailure(pub io::Error);

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the host name did not resolve: {}", self.0)
    }
}

impl StdError for DnsFailure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.0)
    }
}

/// What a transport error says about the connection, read from the types in its
/// `source()` chain (the first that says something, from the outside in):
///
/// | type in the chain | cause |
/// |---|---|
/// | [`DnsFailure`] | `Dns` |
/// | `rustls::Error` | `Tls` |
/// | `hyper::Error` that is an incomplete message | `ClosedEarly` |
/// | `io::ErrorKind::ConnectionRefused` | `Refused` |
/// | `ConnectionReset`, `ConnectionAborted`, `BrokenPipe` | `Reset` |
/// | `UnexpectedEof`, `NotConnected` | `ClosedEarly` |
/// | anything else | `Other` |
pub fn connection_cause(error: &(dyn StdError + 'static)) -> ConnectionCause {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(cause) = cause_of(e) {
            return cause;
        }
        next = match e.downcast_ref::<io::Error>() {
            // An io::Error's `source()` skips the error it wraps; `get_ref` does not.
            Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    ConnectionCause::Other
}

fn cause_of(e: &(dyn StdError + 'static)) -> Option<ConnectionCause> {
    if e.is::<DnsFailure>() {
        return Some(ConnectionCause::Dns);
    }
    #[cfg(feature = "net")]
    {
        if e.is::<rustls::Error>() {
            return Some(ConnectionCause::Tls);
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>()
            && h.is_incomplete_message()
        {
            return Some(ConnectionCause::ClosedEarly);
        }
    }
    let io = e.downcast_ref::<io::Error>()?;
    match io.kind() {
        io::ErrorKind::ConnectionRefused => Some(ConnectionCause::Refused),
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => Some(ConnectionCause::Reset),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::NotConnected => {
            Some(ConnectionCause::ClosedEarly)
        }
        _ => None,
    }
}

/// The innermost error's text: it names what failed (`Connection refused (os error
/// 111)`) without the outer layers, which may carry the URL.
fn innermost(error: &(dyn StdError + 'static)) -> String {
    let mut last = error;
    let mut next = Some(error);
    while let Some(e) = next {
        last = e;
        next = match e.downcast_ref::<io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    last.to_string()
}

/// The [`ProviderError::Connection`] a transport error stands for: its
/// [`connection_cause`] and its innermost error's text, with every non-empty secret in
/// `secrets` cut out.
pub fn connection_error(error: &(dyn StdError + 'static), secrets: &[&str]) -> ProviderError {
    ProviderError::Connection {
        cause: connection_cause(error),
        detail: super::redact(&innermost(error), secrets),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(Box<dyn StdError + Send + Sync>);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("error sending request for url (https://example.test/?key=sk-1)")
        }
    }

    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.0)
        }
    }

    fn cause(inner: impl StdError + Send + Sync + 'static) -> ConnectionCause {
        connection_cause(&Outer(Box::new(inner)))
    }

    #[test]
    fn io_kinds_are_connection_causes() {
        let io = |k| io::Error::from(k);
        assert_eq!(
            cause(io(io::ErrorKind::ConnectionRefused)),
            ConnectionCause::Refused
        );
        assert_eq!(
            cause(io(io::ErrorKind::ConnectionReset)),
            ConnectionCause::Reset
        );
        assert_eq!(cause(io(io::ErrorKind::BrokenPipe)), ConnectionCause::Reset);
        assert_eq!(
            cause(io(io::ErrorKind::UnexpectedEof)),
            ConnectionCause::ClosedEarly
        );
        assert_eq!(
            cause(io(io::ErrorKind::InvalidData)),
            ConnectionCause::Other
        );
    }

    #[test]
    fn a_dns_failure_is_dns_by_type() {
        let dns = DnsFailure(io::Error::other("failed to lookup address information"));
        assert_eq!(cause(dns), ConnectionCause::Dns);
    }

    #[test]
    fn an_error_wrapped_in_an_io_error_is_found() {
        // rustls and hyper wrap their errors in io::Error, whose source() skips them.
        let wrapped = io::Error::other(DnsFailure(io::Error::other("no such host")));
        assert_eq!(cause(wrapped), ConnectionCause::Dns);
    }

    #[cfg(feature = "net")]
    #[test]
    fn a_tls_failure_is_tls_by_type() {
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(cause(tls), ConnectionCause::Tls);
    }

    #[test]
    fn the_detail_is_the_innermost_text_without_the_url_or_the_key() {
        let error = Outer(Box::new(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "reset by peer sk-1",
        )));
        let ProviderError::Connection { cause, detail } = connection_error(&error, &["sk-1"])
        else {
            panic!()
        };
        assert_eq!(cause, ConnectionCause::Reset);
        assert_eq!(detail, "reset by peer [redacted]");
    }
}
