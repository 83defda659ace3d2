//! The rabbit:// transport URL rules (`common-types.md` §3.8). Errors name the scheme or the
//! rule, never the URL: it carries the broker password.

use super::dsn::encode_userinfo;

/// The AMQP port when a URL names none.
pub const DEFAULT_BROKER_PORT: u16 = 5672;

/// Why a brownfield URL cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum UrlProblem {
    /// The scheme is not rabbit: an error that ends the pass. The scheme is named only when it
    /// is a valid scheme token; anything else before a `://` may be part of the credential.
    Scheme(Option<String>),
    /// The last host names no explicit port: refused with TransportURLRejected.
    NoExplicitPort,
    /// A host is an IPv6 literal: refused with TransportURLRejected.
    Ipv6Literal,
}

impl UrlProblem {
    /// The refusal text, naming the rule and never the URL.
    pub fn describe(&self) -> String {
        match self {
            UrlProblem::Scheme(Some(scheme)) => format!("scheme must be rabbit, got \"{scheme}\""),
            UrlProblem::Scheme(None) => {
                "scheme must be rabbit, but the URL has no valid scheme".to_owned()
            }
            UrlProblem::NoExplicitPort => "the URL names no explicit port: nova expands the cell mapping's {hostname}:{port} template from it".to_owned(),
            UrlProblem::Ipv6Literal => "the URL uses an IPv6 literal host: nova expands the cell mapping's {hostname}:{port} template from it, which cannot carry one".to_owned(),
        }
    }
}

/// The managed URL from the default-user Secret: `rabbit://<user>:<pass>@<host>:<port>/`.
pub fn managed(user: &str, password: &str, host: &str, port: &str) -> String {
    format!(
        "rabbit://{}:{}@{host}:{port}/",
        encode_userinfo(user),
        encode_userinfo(password)
    )
}

/// Checks a brownfield URL and returns the broker port of its last host. A multi-host URL
/// (`rabbit://u:p@h1:5672,u:p@h2:5672/`) passes as long as its last host names a port.
pub fn check_brownfield(url: &str) -> Result<u16, UrlProblem> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if scheme != "rabbit" {
        return Err(UrlProblem::Scheme(
            is_scheme(scheme).then(|| scheme.to_owned()),
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hosts: Vec<&str> = authority
        .split(',')
        .map(|h| h.rsplit_once('@').map_or(h, |(_, host)| host))
        .collect();
    if hosts.iter().any(|h| h.starts_with('[')) {
        return Err(UrlProblem::Ipv6Literal);
    }
    let last = hosts.last().copied().unwrap_or_default();
    last.rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .filter(|port| *port > 0)
        .ok_or(UrlProblem::NoExplicitPort)
}

/// Whether `s` is an RFC 3986 scheme: a letter, then letters, digits, `+`, `-` or `.`.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The port the NetworkPolicy opens: the URL's explicit port, else the AMQP default.
pub fn egress_port(url: &str) -> u16 {
    check_brownfield(url).unwrap_or(DEFAULT_BROKER_PORT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_managed_url_encodes_its_userinfo() {
        assert_eq!(
            managed("default_user_x", "p@ss:w/rd", "rmq.ns.svc", "5671"),
            "rabbit://default_user_x:p%40ss%3Aw%2Frd@rmq.ns.svc:5671/"
        );
    }

    #[test]
    fn brownfield_urls() {
        assert_eq!(
            check_brownfield("rabbit://u:p@rmq.example.com:5671/nova?ssl=1"),
            Ok(5671)
        );
        assert_eq!(
            check_brownfield("rabbit://u:p@h1:5672,u:p@h2:5673/"),
            Ok(5673)
        );
        assert_eq!(check_brownfield("rabbit://u:p@h1,u:p@h2:5672/"), Ok(5672));
        assert_eq!(
            check_brownfield("rabbit://u:p@rmq.example.com/"),
            Err(UrlProblem::NoExplicitPort)
        );
        assert_eq!(
            check_brownfield("rabbit://u:p@h1:5672,u:p@h2/"),
            Err(UrlProblem::NoExplicitPort)
        );
        assert_eq!(
            check_brownfield("rabbit://u:p@[fd00::1]:5672/"),
            Err(UrlProblem::Ipv6Literal)
        );
        assert_eq!(
            check_brownfield("amqp://u:p@h:5672/"),
            Err(UrlProblem::Scheme(Some("amqp".into())))
        );
        assert_eq!(check_brownfield("not a url"), Err(UrlProblem::Scheme(None)));
    }

    #[test]
    fn problems_never_quote_the_url() {
        let url = "amqp://user:topsecret@h:5672/";
        let problem = check_brownfield(url).expect_err("wrong scheme");
        assert!(!problem.describe().contains("topsecret"));
        assert_eq!(problem.describe(), "scheme must be rabbit, got \"amqp\"");
        for p in [UrlProblem::NoExplicitPort, UrlProblem::Ipv6Literal] {
            assert!(!p.describe().contains("://"));
        }
    }

    #[test]
    fn a_scheme_that_is_not_a_scheme_token_is_never_quoted() {
        // Everything before the first "://" here is userinfo: quoting it leaked the password.
        for url in [
            "amqp//user:planted-pw@h/?x=a://",
            "user:planted-pw@h://",
            "1amqp://u:planted-pw@h:5672/",
            "://planted-pw",
        ] {
            let problem = check_brownfield(url).expect_err("not rabbit");
            assert_eq!(problem, UrlProblem::Scheme(None), "{url}");
            assert!(!problem.describe().contains("planted-pw"));
            assert_eq!(
                problem.describe(),
                "scheme must be rabbit, but the URL has no valid scheme"
            );
        }
        assert_eq!(
            check_brownfield("amqps+x.y-z://u:planted-pw@h:5671/"),
            Err(UrlProblem::Scheme(Some("amqps+x.y-z".into())))
        );
    }

    #[test]
    fn the_egress_port_falls_back_to_amqp() {
        assert_eq!(egress_port("rabbit://u:p@h:5671/"), 5671);
        assert_eq!(egress_port("rabbit://u:p@h/"), DEFAULT_BROKER_PORT);
    }
}
