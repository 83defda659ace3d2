//! The URL shape of every endpoint field. A URL may carry credentials in its user information,
//! so no message ever quotes it: errors name the field and, where one was written, the scheme.

use crate::field::{FieldError, Path, Violations};

/// Which schemes a field accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schemes {
    /// http or https.
    HttpOrHttps,
    /// https only (spec.remoteCompute.keystoneEndpoint).
    HttpsOnly,
}

/// The reason spec.remoteCompute.keystoneEndpoint must be https.
pub const REMOTE_HTTPS_REASON: &str = "the nova service-user password is sent to it on every token request, across a cluster boundary";

/// The scheme written before `://`, when the value has that shape: only then is it safe to
/// name (a value like `user:secret@host` parses with the user name as its "scheme").
fn written_scheme(value: &str) -> Option<&str> {
    let (scheme, _) = value.split_once("://")?;
    let ok = scheme.bytes().enumerate().all(|(i, b)| {
        b.is_ascii_alphabetic()
            || (i > 0 && (b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.')))
    });
    (ok && !scheme.is_empty()).then_some(scheme)
}

/// Checks one URL field; `value` is non-empty (emptiness is the caller's rule).
pub fn check(path: &Path, value: &str, schemes: Schemes, errors: &mut Violations) {
    if value.chars().any(char::is_control) {
        errors.push(FieldError::invalid_omitted(
            path,
            "must not contain control characters such as a newline or carriage return",
        ));
        return;
    }
    let want = match schemes {
        Schemes::HttpOrHttps => "an http or https",
        Schemes::HttpsOnly => "an https",
    };
    let Some(scheme) = written_scheme(value) else {
        errors.push(FieldError::invalid_omitted(
            path,
            format!("must be {want} URL with a scheme and a host, such as https://keystone.example.com/v3"),
        ));
        return;
    };
    let scheme = scheme.to_ascii_lowercase();
    match schemes {
        Schemes::HttpOrHttps if scheme != "http" && scheme != "https" => {
            errors.push(FieldError::invalid_omitted(
                path,
                format!(
                    "must use the http or https scheme, not {}",
                    crate::field::go_quote(&scheme)
                ),
            ));
            return;
        }
        Schemes::HttpsOnly if scheme != "https" => {
            errors.push(FieldError::invalid_omitted(
                path,
                format!(
                    "must use the https scheme, not {}: {REMOTE_HTTPS_REASON}",
                    crate::field::go_quote(&scheme)
                ),
            ));
            return;
        }
        _ => {}
    }
    // Go's url.Parse keeps an empty authority empty where the url crate skips extra slashes.
    let authority = value
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
        .unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        errors.push(FieldError::invalid_omitted(path, "must name a host"));
        return;
    }
    match url::Url::parse(value) {
        Err(e) => errors.push(FieldError::invalid_omitted(
            path,
            format!("must be a parseable URL: {e}"),
        )),
        Ok(url) => {
            if url.host_str().is_none_or(str::is_empty) {
                errors.push(FieldError::invalid_omitted(path, "must name a host"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(value: &str, schemes: Schemes) -> Vec<String> {
        let mut errs = Violations::default();
        check(
            &Path::new("spec.keystoneEndpoint"),
            value,
            schemes,
            &mut errs,
        );
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn urls() {
        assert!(
            run(
                "http://keystone.openstack.svc.cluster.local:5000/v3",
                Schemes::HttpOrHttps
            )
            .is_empty()
        );
        assert!(run("https://[::1]:5000/v3", Schemes::HttpsOnly).is_empty());
        assert_eq!(
            run("keystone.example.com/v3", Schemes::HttpsOnly),
            vec![
                "spec.keystoneEndpoint: Invalid value: must be an https URL with a scheme and a host, such as https://keystone.example.com/v3"
            ]
        );
        assert_eq!(
            run("http://keystone.example.com/v3", Schemes::HttpsOnly),
            vec![format!(
                "spec.keystoneEndpoint: Invalid value: must use the https scheme, not \"http\": {REMOTE_HTTPS_REASON}"
            )]
        );
        assert_eq!(
            run("ftp://k/v3", Schemes::HttpOrHttps),
            vec![
                "spec.keystoneEndpoint: Invalid value: must use the http or https scheme, not \"ftp\""
            ]
        );
        assert_eq!(
            run("http://k\n/v3", Schemes::HttpOrHttps),
            vec![
                "spec.keystoneEndpoint: Invalid value: must not contain control characters such as a newline or carriage return"
            ]
        );
        assert_eq!(run("http:///v3", Schemes::HttpOrHttps).len(), 1);
        assert_eq!(run("https://exa mple.com/", Schemes::HttpOrHttps).len(), 1);
    }

    #[test]
    fn credentials_never_reach_a_message() {
        for value in [
            "admin:s3cret@keystone:5000",
            "http://admin:s3cret@/v3",
            "admin:s3cret@host://x",
            "https://admin:s3cret@exa mple/",
        ] {
            for msg in run(value, Schemes::HttpsOnly)
                .into_iter()
                .chain(run(value, Schemes::HttpOrHttps))
            {
                assert!(!msg.contains("s3cret") && !msg.contains("admin"), "{msg}");
            }
        }
    }
}
