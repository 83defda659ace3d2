//! The Keystone, Nova and Placement client the Aggregates, Services and Traits steps of a
//! NovaCompute pass share (`novacompute.md` §7): built once per pass, it takes its token on
//! first use from the tokens every pass shares ([`Sessions`]: one per cloud and service user,
//! reused until shortly before it expires), asks Keystone only when none is kept, and keeps
//! the token (or the failure) for the rest of the pass. A pass asks Keystone at most twice:
//! once for a token, and once more when a service refuses a kept one (401). Every request is
//! bounded by the transport's 10 s timeout.
//!
//! Errors name the call and the path, never a URL's credentials, the password or the token:
//! an error body is scrubbed of both before its first 512 bytes are kept.

pub mod action;
pub mod keystone;
pub mod nova;
pub mod placement;
pub mod sessions;
pub mod transport;
pub mod trust;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use sessions::Sessions;
pub use transport::{Direct, EmptyCloud, Proxied, Request, Response, Transport, TransportError};

use sessions::TokenKey;

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
    /// A cell did not answer the server listing: the host's servers cannot be counted.
    #[error(
        "a cell did not answer (Nova listed a server with status UNKNOWN), so the servers on host {0} cannot be counted"
    )]
    ServersUncountable(String),
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

impl Api {
    /// The `service` label of its requests.
    fn service(self) -> &'static str {
        match self {
            Api::Compute(_) => "compute",
            Api::Placement => "placement",
        }
    }
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
    /// The tokens shared across passes, and this client's key into them.
    sessions: Arc<Sessions>,
    key: TokenKey,
    /// This pass's token, or the failure to get one (kept for the rest of the pass).
    session: tokio::sync::Mutex<Option<Result<Arc<Session>, OpenStackError>>>,
    /// Whether this pass already replaced a refused token (once at most).
    renewed: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.endpoints)
            .field("username", &self.credentials.username)
            .field("authenticated", &self.authenticated())
            .finish()
    }
}

/// The bytes of an error body kept in a message.
const BODY_EXCERPT: usize = 512;

impl Client {
    /// A client that has no token yet and keeps its tokens to itself.
    pub fn new(
        transport: Arc<dyn Transport>,
        endpoints: Endpoints,
        credentials: Credentials,
    ) -> Self {
        let key = TokenKey::new("", &endpoints, &credentials);
        Self {
            transport,
            endpoints,
            credentials,
            sessions: Arc::default(),
            key,
            session: tokio::sync::Mutex::new(None),
            renewed: AtomicBool::new(false),
        }
    }

    /// The client, verifying https endpoints against `bundle` too (the Nova's spec.tls) where
    /// its transport verifies them itself.
    pub fn trusting(mut self, bundle: Option<&trust::CaBundle>) -> Self {
        if let Some(transport) = bundle.and_then(|b| self.transport.trusting(b)) {
            self.transport = transport;
        }
        self
    }

    /// The client, taking and keeping its tokens in `sessions`, its calls reaching the
    /// services through `cloud` (a target cluster's name; empty for the management cluster).
    pub fn sharing(mut self, sessions: Arc<Sessions>, cloud: &str) -> Self {
        self.key = TokenKey::new(cloud, &self.endpoints, &self.credentials);
        self.sessions = sessions;
        self
    }

    /// Whether this client holds a token (or a failure to get one) yet.
    pub fn authenticated(&self) -> bool {
        self.session.try_lock().is_ok_and(|s| s.is_some())
    }

    /// The token of this pass: on first use the kept one, else a new one from Keystone; the
    /// answer (or failure) is kept for the pass.
    async fn session(&self) -> Result<Arc<Session>, OpenStackError> {
        let mut slot = self.session.lock().await;
        if let Some(kept) = &*slot {
            return kept.clone();
        }
        let session = match self.sessions.reuse(&self.key, &self.credentials.password) {
            Some(session) => Ok(session),
            None => self
                .authenticate()
                .await
                .map_err(|e| OpenStackError::Unauthenticated(Box::new(e))),
        };
        *slot = Some(session.clone());
        session
    }

    /// Drops `refused` from this pass and from the shared tokens, once per pass: the next
    /// call asks Keystone again. Returns whether it did (a second refusal is the answer).
    async fn renew(&self, refused: &Session) -> bool {
        if self.renewed.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.sessions.forget(&self.key, &refused.token);
        let mut slot = self.session.lock().await;
        if matches!(&*slot, Some(Ok(s)) if s.token == refused.token) {
            *slot = None;
        }
        true
    }

    async fn authenticate(&self) -> Result<Arc<Session>, OpenStackError> {
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
        let sent = Instant::now();
        let response = self.transport.send(request).await;
        let status = response.as_ref().ok().map(|r| r.status);
        self.sessions
            .count("keystone", &http::Method::POST, status, sent);
        let response = response.map_err(|source| OpenStackError::Transport {
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
        let session = Arc::new(Session {
            token: Sensitive::new(token),
            catalog_placement: keystone::placement_from_catalog(
                &response.body,
                self.endpoints.region.as_deref(),
            ),
        });
        // Kept from when the request left: the token cannot be older than that.
        self.sessions.keep(
            &self.key,
            &self.credentials.password,
            session.clone(),
            sent,
            keystone::lifetime(&response.body),
        );
        Ok(session)
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

    /// One authenticated call; any status is returned, the caller decides what it accepts. A
    /// kept token the service refuses (401) is replaced once and the call sent again.
    async fn call(
        &self,
        api: Api,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Response, OpenStackError> {
        let session = self.session().await?;
        let response = self
            .send(api, &session, method.clone(), path, &body)
            .await?;
        if response.status == 401 && self.renew(&session).await {
            let session = self.session().await?;
            return self.send(api, &session, method, path, &body).await;
        }
        Ok(response)
    }

    /// One request with `session`'s token.
    async fn send(
        &self,
        api: Api,
        session: &Session,
        method: http::Method,
        path: &str,
        body: &Option<Value>,
    ) -> Result<Response, OpenStackError> {
        let base = match api {
            Api::Compute(_) => self.endpoints.nova.trim_end_matches('/').to_owned(),
            Api::Placement => self.placement_url().await?,
        };
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
            body: body.as_ref().map(|b| b.to_string().into_bytes()),
        };
        let sent = Instant::now();
        let response = self.transport.send(request).await;
        let status = response.as_ref().ok().map(|r| r.status);
        self.sessions.count(api.service(), &method, status, sent);
        response.map_err(|source| OpenStackError::Transport {
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
        let session = self.session().await.ok();
        let token = session.as_ref().map(|s| &s.token);
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

    #[tokio::test]
    async fn every_request_is_counted_and_timed_by_service_method_and_code() {
        let fake = Fake::new()
            .answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": []}"#)
            .answer("PUT", "/placement/traits/CUSTOM_A", 204, "")
            .fail(
                "DELETE",
                "/placement/traits/CUSTOM_A",
                TransportError::TimedOut("placement.test".into()),
            );
        let metrics = crate::metrics::Metrics::new().expect("registers once");
        let sessions = Arc::new(Sessions::counted(metrics.openstack_requests.clone()));
        let pass = client(&fake, Some("http://placement.test/placement")).sharing(sessions, "");
        pass.aggregates().await.expect("listed");
        pass.ensure_trait("CUSTOM_A").await.expect("created");
        pass.delete_trait("CUSTOM_A").await.expect_err("timed out");
        let requests = &metrics.openstack_requests;
        for labels in [
            ["keystone", "POST", "201"],
            ["compute", "GET", "200"],
            ["placement", "PUT", "204"],
            ["placement", "DELETE", "none"],
        ] {
            assert_eq!(
                requests.total.with_label_values(&labels).get(),
                1,
                "{labels:?}"
            );
            let timed = requests.duration.with_label_values(&labels);
            assert_eq!(timed.get_sample_count(), 1, "{labels:?}");
        }
        let text = metrics.render();
        assert!(
            text.contains(r#"nova_operator_openstack_request_duration_seconds_bucket{code="201",method="POST",service="keystone",le="10"} 1"#),
            "{text}"
        );
    }

    /// A token response stating an hour's lifetime (Keystone's clock, far from ours).
    const HOUR_TOKEN: &str = r#"{"token": {"issued_at": "2001-01-01T10:00:00.000000Z", "expires_at": "2001-01-01T11:00:00.000000Z", "catalog": []}}"#;

    fn logins(fake: &Fake) -> usize {
        let all = fake.requests().len();
        all - fake.calls().len()
    }

    #[tokio::test]
    async fn passes_sharing_sessions_reuse_one_token_per_cloud_and_user() {
        let fake = Fake::new()
            .login(201, Some(fake::TOKEN), HOUR_TOKEN)
            .answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": []}"#);
        let sessions = Arc::new(Sessions::default());
        for _ in 0..3 {
            let pass = client(&fake, None).sharing(sessions.clone(), "");
            pass.aggregates().await.expect("listed");
        }
        assert_eq!(logins(&fake), 1, "one token for three passes");
        client(&fake, None)
            .sharing(sessions.clone(), "target-a")
            .aggregates()
            .await
            .expect("listed");
        assert_eq!(logins(&fake), 2, "another cloud, another token");
        let mut rotated = client(&fake, None);
        rotated.credentials.password = Sensitive::new("a-new-password");
        rotated
            .sharing(sessions.clone(), "")
            .aggregates()
            .await
            .expect("listed");
        assert_eq!(logins(&fake), 3, "a changed password is a new token");
    }

    #[tokio::test]
    async fn a_token_without_a_stated_lifetime_serves_only_its_pass() {
        let fake = Fake::new().answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": []}"#);
        let sessions = Arc::new(Sessions::default());
        for _ in 0..2 {
            let pass = client(&fake, None).sharing(sessions.clone(), "");
            pass.aggregates().await.expect("listed");
            pass.aggregates().await.expect("listed again");
        }
        assert_eq!(logins(&fake), 2);
    }

    #[tokio::test]
    async fn a_refused_kept_token_is_replaced_once_and_the_call_sent_again() {
        let listed = r#"{"aggregates": []}"#;
        let cloud = |answers: &[(u16, &str)]| {
            answers.iter().fold(
                Fake::new().login(201, Some(fake::TOKEN), HOUR_TOKEN),
                |fake, (status, body)| fake.answer("GET", "/v2.1/os-aggregates", *status, body),
            )
        };
        let sessions = Arc::new(Sessions::default());
        let first = cloud(&[(200, listed)]);
        let pass = client(&first, None).sharing(sessions.clone(), "");
        pass.aggregates().await.expect("listed");
        assert_eq!(logins(&first), 1);

        let revoked = cloud(&[(401, "token revoked"), (200, listed)]);
        let pass = client(&revoked, None).sharing(sessions.clone(), "");
        pass.aggregates().await.expect("listed with a new token");
        assert_eq!(logins(&revoked), 1, "the refused kept token was replaced");
        assert_eq!(revoked.calls().len(), 2, "and the call sent again");

        let refused = cloud(&[(401, "refused"), (401, "refused"), (401, "refused")]);
        let pass = client(&refused, None).sharing(sessions, "");
        let err = pass.aggregates().await.expect_err("refused twice");
        assert!(err.to_string().contains("HTTP 401"), "{err}");
        pass.aggregates().await.expect_err("refused again");
        assert_eq!(logins(&refused), 1, "one renewal per pass, not a loop");
    }

    #[test]
    fn segments_escape_what_a_path_cannot_carry() {
        assert_eq!(segment("CUSTOM_GPU_A100"), "CUSTOM_GPU_A100");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
