//! A scripted [`Transport`] for the client's unit tests: canned answers by method and path,
//! and a record of every request. The real services are proven by `tests/openstack_client.rs`.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::{Client, Credentials, Endpoints, Request, Response, Transport, TransportError};
use crate::sensitive::Sensitive;

/// The token the fake Keystone issues.
pub const TOKEN: &str = "gAAAAAB-the-fake-token";

/// One request the fake saw.
pub struct Seen {
    pub method: String,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

impl Seen {
    /// `<METHOD> <url>`.
    pub fn target(&self) -> String {
        format!("{} {}", self.method, self.url)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone)]
enum Answer {
    Reply {
        status: u16,
        token: Option<String>,
        body: String,
    },
    Fail(TransportError),
}

#[derive(Default)]
struct Script {
    /// (method, path) → answer; the first match answers, and is used up while a later one of
    /// the same key waits behind it.
    answers: Vec<(String, String, Answer)>,
    seen: Vec<Seen>,
}

/// The scripted transport.
#[derive(Clone)]
pub struct Fake(Arc<Mutex<Script>>);

impl Fake {
    /// A fake whose Keystone issues [`TOKEN`] with a catalog naming `http://placement.test:8778`.
    pub fn new() -> Self {
        Self(Arc::default()).login(
            201,
            Some(TOKEN),
            r#"{"token": {"catalog": [{"type": "placement", "endpoints": [
                {"interface": "internal", "url": "http://placement.test:8778", "region_id": "RegionOne"}]}]}}"#,
        )
    }

    /// Replaces Keystone's answer.
    pub fn login(self, status: u16, token: Option<&str>, body: &str) -> Self {
        self.with(|s| {
            s.answers.retain(|(_, p, _)| p != "/v3/auth/tokens");
            s.answers.push((
                "POST".into(),
                "/v3/auth/tokens".into(),
                Answer::Reply {
                    status,
                    token: token.map(str::to_owned),
                    body: body.to_owned(),
                },
            ));
        })
    }

    /// Answers `method path` (path and query) with `status` and `body`.
    pub fn answer(self, method: &str, path: &str, status: u16, body: &str) -> Self {
        self.with(|s| {
            s.answers.push((
                method.into(),
                path.into(),
                Answer::Reply {
                    status,
                    token: None,
                    body: body.to_owned(),
                },
            ))
        })
    }

    /// Fails `method path` in transport.
    pub fn fail(self, method: &str, path: &str, error: TransportError) -> Self {
        self.with(|s| {
            s.answers
                .push((method.into(), path.into(), Answer::Fail(error)))
        })
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.with_ref(|s| {
            s.seen
                .iter()
                .map(|r| Seen {
                    method: r.method.clone(),
                    url: r.url.clone(),
                    headers: r.headers.clone(),
                    body: r.body.clone(),
                })
                .collect()
        })
    }

    /// `<METHOD> <path>` of every request to the services after the login.
    pub fn calls(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| !r.url.ends_with("/v3/auth/tokens"))
            .map(|r| format!("{} {}", r.method, super::path_of(&r.url)))
            .collect()
    }

    fn with(self, f: impl FnOnce(&mut Script)) -> Self {
        if let Ok(mut script) = self.0.lock() {
            f(&mut script);
        }
        self
    }

    fn with_ref<T>(&self, f: impl FnOnce(&Script) -> T) -> T {
        f(&self.0.lock().expect("the fake's lock"))
    }
}

impl Transport for Fake {
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, TransportError>> {
        let mut script = self.0.lock().expect("the fake's lock");
        let method = request.method.to_string();
        let path = super::path_of(&request.url);
        script.seen.push(Seen {
            method: method.clone(),
            url: request.url.clone(),
            headers: request.headers.clone(),
            body: String::from_utf8_lossy(request.body.as_deref().unwrap_or_default()).into_owned(),
        });
        let matching: Vec<usize> = (0..script.answers.len())
            .filter(|&i| script.answers[i].0 == method && script.answers[i].1 == path)
            .collect();
        let answer = match matching.as_slice() {
            [] => Answer::Reply {
                status: 599,
                token: None,
                body: format!("the fake has no answer for {method} {path}"),
            },
            [only] => script.answers[*only].2.clone(),
            [first, ..] => script.answers.remove(*first).2,
        };
        Box::pin(async move {
            match answer {
                Answer::Fail(e) => Err(e),
                Answer::Reply {
                    status,
                    token,
                    body,
                } => {
                    let mut headers = http::HeaderMap::new();
                    if let Some(token) = token.and_then(|t| t.parse().ok()) {
                        headers.insert("x-subject-token", token);
                    }
                    Ok(Response {
                        status,
                        headers,
                        body: body.into_bytes().into(),
                    })
                }
            }
        })
    }
}

/// A client of `fake`, user `nova` with password `the-password`, Placement from `placement`
/// or the catalog.
pub fn client(fake: &Fake, placement: Option<&str>) -> Client {
    Client::new(
        Arc::new(fake.clone()),
        Endpoints {
            keystone: "http://keystone.test:5000".into(),
            nova: "http://nova.test:8774".into(),
            placement: placement.map(str::to_owned),
            region: None,
        },
        Credentials {
            username: "nova".into(),
            password: Sensitive::new("the-password"),
            project_name: "service".into(),
            user_domain_name: "Default".into(),
            project_domain_name: "Default".into(),
        },
    )
}
