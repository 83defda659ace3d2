//! The Keystone, Nova and Placement client the Aggregates, Services and Traits steps of a
//! NovaCompute pass share (`novacompute.md` §7): built once per pass, it requests its token
//! lazily on first use and keeps it (or the failure) for the rest of the pass, so a pass asks
//! Keystone at most once. Every request is bounded by the transport's 10 s timeout.
//!
//! Errors name the call and the path, never a URL's credentials, the password or the token:
//! an error body is scrubbed of both before its first 512 bytes are kept.

pub mod action;
pub mod keystone;
pub mod nova;
pub mod placement;
pub mod transport;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use transport::{Direct, EmptyCloud, Proxied, Request, Response, Transport, TransportError};

use crate::sensitive::{REDACTED, Sensitive};

/// The service user a pool calls OpenStack as (the Nova's `spec.serviceUser`).
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password (never formatted).
    pub password: Sensitive,
    /// The project the token is scoped to.
    pub project_name: String,
    /// The user's domain, by name.
    pub user_domain_name: String,
    /// The project's domain, by name.
    pub project_domain_name: String,
}

/// Where the services are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The Nova's `spec.keystoneEndpoint` (with or without `/v3`).
    pub keystone: String,
    /// The compute API root, `http://<nova>.<ns>.svc.cluster.local:8774`.
    pub nova: String,
    /// The Nova's `spec.endpoints.placement.override`; else the token's catalog is read.
    pub placement: Option<String>,
    /// The Nova's `spec.region`: the catalog entry must be in it when set.
    pub region: Option<String>,
}

/// A failed OpenStack call. Its text reaches a condition message, so it never carries the
/// password or the token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenStackError {
    /// The service answered with a status the call does not accept.
    #[error("{method} {path}: HTTP {status}: {body}")]
    Status {
        /// The method.
        method: String,
        /// The path (and query).
        path: String,
        /// The status code.
        status: u16,
        /// The first 512 bytes of the body, scrubbed of the credentials.
        body: String,
    },
    /// No answer.
    #[error("{method} {path}: {source}")]
    Transport {
        /// The method.
        method: String,
        /// The path (and query).
        path: String,
        /// Why.
        #[source]
        source: TransportError,
    },
    /// An answer that is not the document the call expects.
    #[error("{method} {path}: {message}")]
    Decode {
        /// The method.
        method: String,
        /// The path (and query).
        path: String,
        /// The decoder's complaint.
        message: String,
    },
    /// The token request of this pass failed (every later call of the pass fails with it).
    #[error("{0}")]
    Unauthenticated(Box<OpenStackError>),
    /// Keystone answered 201 without the token header.
    #[error("keystone returned no X-Subject-Token")]
    NoToken,
    /// Neither the override nor the catalog names Placement.
    #[error(
        "no Placement endpoint: spec.endpoints.placement.override is unset and the token's catalog has no internal placement endpoint{0}"
    )]
    NoPlacementEndpoint(String),
    /// A cell did not answer the service listing.
    #[error("the cell of host {0} did not answer, so the service list is incomplete")]
    CellDown(String),
    /// The hypervisor list kept paging.
    #[error("the hypervisor list did not end after 100 pages")]
    EndlessHypervisors,
}

/// The OpenStack API a request goes to, and so its version headers.
#[derive(Clone, Copy, Debug)]
enum Api {
    /// The compute API at a microversion.
    Compute(&'static str),
    /// Placement at 1.6, the first version with the traits API.
    Placement,
}

/// What the token request returned.
struct Session {
    token: Sensitive,
    /// The internal Placement endpoint of the catalog, if any.
    catalog_placement: Option<String>,
}

/// The client of one pass.
pub struct Client {
    transport: Arc<dyn Transport>,
    endpoints: Endpoints,
    credentials: Credentials,
    session: tokio::sync::OnceCell<Result<Session, OpenStackError>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.endpoints)
            .field("username", &self.credentials.username)
            .field("authenticated", &self.session.initialized())
            .finish()
    }
}

/// The bytes of an error body kept in a message.
const BODY_EXCERPT: usize = 512;

impl Client {
    /// A client that has not authenticated yet.
    pub fn new(
        transport: Arc<dyn Transport>,
        endpoints: Endpoints,
        credentials: Credentials,
    ) -> Self {
        Self {
            transport,
            endpoints,
            credentials,
            session: tokio::sync::OnceCell::new(),
        }
    }

    /// Whether this client asked Keystone for a token yet.
    pub fn authenticated(&self) -> bool {
        self.session.initialized()
    }

    /// The token of this pass: requested on first use, the answer (or failure) kept.
    async fn session(&self) -> Result<&Session, OpenStackError> {
        self.session
            .get_or_init(|| async {
                self.authenticate()
                    .await
                    .map_err(|e| OpenStackError::Unauthenticated(Box::new(e)))
            })
            .await
            .as_ref()
            .map_err(Clone::clone)
    }

    async fn authenticate(&self) -> Result<Session, OpenStackError> {
        let url = keystone::tokens_url(&self.endpoints.keystone);
        let body = keystone::token_request(&self.credentials).to_string();
        let request = Request {
            method: http::Method::POST,
            url: url.clone(),
            headers: vec![
                ("Content-Type", "application/json".to_owned()),
                ("Accept", "application/json".to_owned()),
            ],
            body: Some(body.into_bytes()),
        };
        let path = path_of(&url);
        let response =
            self.transport
                .send(request)
                .await
                .map_err(|source| OpenStackError::Transport {
                    method: "POST".into(),
                    path: path.clone(),
                    source,
                })?;
        if response.status != 201 {
            return Err(self.unexpected("POST", &path, &response, None));
        }
        let token = response
            .header("x-subject-token")
            .filter(|t| !t.is_empty())
            .ok_or(OpenStackError::NoToken)?;
        Ok(Session {
            token: Sensitive::new(token),
            catalog_placement: keystone::placement_from_catalog(
                &response.body,
                self.endpoints.region.as_deref(),
            ),
        })
    }

    /// The Placement root: the override, else the catalog's internal endpoint.
    async fn placement_url(&self) -> Result<String, OpenStackError> {
        if let Some(url) = &self.endpoints.placement {
            return Ok(url.trim_end_matches('/').to_owned());
        }
        self.session()
            .await?
            .catalog_placement
            .clone()
            .ok_or_else(|| {
                OpenStackError::NoPlacementEndpoint(
                    self.endpoints
                        .region
                        .as_ref()
                        .map(|r| format!(" in region {r}"))
                        .unwrap_or_default(),
                )
            })
    }

    /// One authenticated call; any status is returned, the caller decides what it accepts.
    async fn call(
        &self,
        api: Api,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Response, OpenStackError> {
        let base = match api {
            Api::Compute(_) => self.endpoints.nova.trim_end_matches('/').to_owned(),
            Api::Placement => self.placement_url().await?,
        };
        let session = self.session().await?;
        let mut headers = vec![
            ("X-Auth-Token", session.token.expose().to_owned()),
            ("Accept", "application/json".to_owned()),
        ];
        match api {
            Api::Compute(version) => {
                headers.push(("X-OpenStack-Nova-API-Version", version.to_owned()));
                headers.push(("OpenStack-API-Version", format!("compute {version}")));
            }
            Api::Placement => headers.push(("OpenStack-API-Version", "placement 1.6".to_owned())),
        }
        if body.is_some() {
            headers.push(("Content-Type", "application/json".to_owned()));
        }
        let request = Request {
            method: method.clone(),
            url: format!("{base}{path}"),
            headers,
            body: body.map(|b| b.to_string().into_bytes()),
        };
        self.transport
            .send(request)
            .await
            .map_err(|source| OpenStackError::Transport {
                method: method.to_string(),
                path: path.to_owned(),
                source,
            })
    }

    /// The error of an answer the call does not accept: its body scrubbed of the password and
    /// the token, then cut to 512 bytes.
    fn unexpected(
        &self,
        method: &str,
        path: &str,
        response: &Response,
        token: Option<&Sensitive>,
    ) -> OpenStackError {
        let mut body = String::from_utf8_lossy(&response.body).into_owned();
        for secret in [Some(&self.credentials.password), token]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
        {
            body = body.replace(secret.expose(), REDACTED);
        }
        let mut end = body.len().min(BODY_EXCERPT);
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        OpenStackError::Status {
            method: method.to_owned(),
            path: path.to_owned(),
            status: response.status,
            body,
        }
    }

    /// A call that accepts exactly the statuses in `accepted`, returning the answer.
    async fn expect(
        &self,
        api: Api,
        method: http::Method,
        path: &str,
        body: Option<Value>,
        accepted: &[u16],
    ) -> Result<Response, OpenStackError> {
        let response = self.call(api, method.clone(), path, body).await?;
        if accepted.contains(&response.status)
            || (accepted.is_empty() && (200..300).contains(&response.status))
        {
            return Ok(response);
        }
        let token = self.session().await.ok().map(|s| &s.token);
        Err(self.unexpected(method.as_str(), path, &response, token))
    }
}

impl Client {
    /// A bodiless call that accepts exactly `accepted` (any 2xx when empty): its status.
    async fn status(
        &self,
        api: Api,
        method: http::Method,
        path: &str,
        body: Option<Value>,
        accepted: &[u16],
    ) -> Result<u16, OpenStackError> {
        Ok(self.expect(api, method, path, body, accepted).await?.status)
    }
}

/// Decodes a JSON answer.
fn decode<T: DeserializeOwned>(
    method: &str,
    path: &str,
    response: &Response,
) -> Result<T, OpenStackError> {
    serde_json::from_slice(&response.body).map_err(|e| OpenStackError::Decode {
        method: method.to_owned(),
        path: path.to_owned(),
        message: format!("the answer does not decode: {e}"),
    })
}

/// The path and query of a URL (what an error names).
fn path_of(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| u[url::Position::BeforePath..].to_owned())
        .unwrap_or_default()
}

/// A path segment: everything but unreserved characters percent-encoded.
fn segment(value: &str) -> String {
    const RESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(value, RESERVED).to_string()
}

#[cfg(test)]
pub(crate) mod fake;

#[cfg(test)]
mod tests {
    use super::fake::{Fake, client};
    use super::*;

    #[tokio::test]
    async fn a_pass_asks_keystone_once_and_sends_the_token_with_the_version_headers() {
        let fake = Fake::new().answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": []}"#);
        let client = client(&fake, None);
        assert!(!client.authenticated());
        client.aggregates().await.expect("listed");
        client.aggregates().await.expect("listed again");
        let seen = fake.requests();
        assert_eq!(
            seen.iter().map(|r| r.target()).collect::<Vec<_>>(),
            [
                "POST http://keystone.test:5000/v3/auth/tokens",
                "GET http://nova.test:8774/v2.1/os-aggregates",
                "GET http://nova.test:8774/v2.1/os-aggregates",
            ]
        );
        let login = &seen[0];
        assert_eq!(login.header("Content-Type"), Some("application/json"));
        assert!(login.body.contains("\"password\":\"the-password\""));
        let list = &seen[1];
        assert_eq!(list.header("X-Auth-Token"), Some(fake::TOKEN));
        assert_eq!(list.header("X-OpenStack-Nova-API-Version"), Some("2.53"));
        assert_eq!(list.header("OpenStack-API-Version"), Some("compute 2.53"));
        assert_eq!(list.header("Content-Type"), None);
    }

    #[tokio::test]
    async fn a_failed_login_is_kept_for_the_pass_and_names_neither_password_nor_token() {
        let fake = Fake::new().login(
            401,
            None,
            r#"{"error": {"message": "The request you have made requires authentication: user nova password the-password"}}"#,
        );
        let pass = client(&fake, None);
        let first = pass.aggregates().await.expect_err("refused");
        let second = pass.compute_services().await.expect_err("still refused");
        assert_eq!(first, second);
        assert_eq!(fake.requests().len(), 1, "one token request per pass");
        let text = first.to_string();
        assert!(
            text.starts_with("POST /v3/auth/tokens: HTTP 401: "),
            "{text}"
        );
        assert!(!text.contains("the-password"), "{text}");
        assert!(text.contains(REDACTED), "{text}");

        let fake = Fake::new().login(201, None, "{}");
        let err = client(&fake, None)
            .aggregates()
            .await
            .expect_err("no token");
        assert_eq!(
            err,
            OpenStackError::Unauthenticated(Box::new(OpenStackError::NoToken))
        );
    }

    #[tokio::test]
    async fn an_error_body_echoing_the_request_is_scrubbed_and_cut() {
        let echo = format!(
            "you sent X-Auth-Token: {} and the password the-password {}",
            fake::TOKEN,
            "x".repeat(2000)
        );
        let fake = Fake::new().answer("GET", "/v2.1/os-aggregates", 500, &echo);
        let err = client(&fake, None)
            .aggregates()
            .await
            .expect_err("500")
            .to_string();
        assert!(!err.contains(fake::TOKEN), "{err}");
        assert!(!err.contains("the-password"), "{err}");
        assert!(
            err.starts_with("GET /v2.1/os-aggregates: HTTP 500: you sent X-Auth-Token: REDACTED"),
            "{err}"
        );
        assert_eq!(
            err.len(),
            "GET /v2.1/os-aggregates: HTTP 500: ".len() + BODY_EXCERPT
        );
    }

    #[tokio::test]
    async fn a_transport_failure_names_the_call() {
        let fake = Fake::new().fail(
            "GET",
            "/v2.1/os-aggregates",
            TransportError::TimedOut("nova.test:8774".into()),
        );
        let err = client(&fake, None)
            .aggregates()
            .await
            .expect_err("timed out");
        assert_eq!(
            err.to_string(),
            "GET /v2.1/os-aggregates: nova.test:8774 did not answer within 10s"
        );
    }

    #[test]
    fn segments_escape_what_a_path_cannot_carry() {
        assert_eq!(segment("CUSTOM_GPU_A100"), "CUSTOM_GPU_A100");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
