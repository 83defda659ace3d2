//! The requests one in-process controller sends, counted by its own client: what a steady-state
//! check reads where the API server's whole-server counters ([`crate::apiserver`]) would also
//! count the tests running beside it (the real tier's share one API server).

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use tower_service::Service;

/// The method and path of every request a [`counted`] client sent.
#[derive(Default)]
pub struct Requests {
    sent: Mutex<Vec<(Method, String)>>,
}

impl Requests {
    /// How many writes (POST, PUT, PATCH, DELETE) reached `resource` (its plural), on its
    /// `subresource` ("" for the object itself).
    pub fn writes(&self, resource: &str, subresource: &str) -> usize {
        let sent = self.sent.lock().expect("the request log");
        sent.iter()
            .filter(|(method, _)| {
                [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method)
            })
            .filter(|(_, path)| addresses(path, resource, subresource))
            .count()
    }
}

/// Whether `path` names an object of `resource` (its collection for a create) and, unless
/// `subresource` is empty, that subresource of it.
fn addresses(path: &str, resource: &str, subresource: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let Some(at) = segments.iter().position(|s| *s == resource) else {
        return false;
    };
    let rest = &segments[at + 1..];
    match subresource {
        "" => rest.len() <= 1,
        sub => rest.len() == 2 && rest[1] == sub,
    }
}

/// `client`, sending through a layer that records each request in the returned log.
pub fn counted(client: Client) -> (Client, Arc<Requests>) {
    let requests = Arc::new(Requests::default());
    let namespace = client.default_namespace().to_owned();
    let service = Counting {
        inner: client,
        requests: requests.clone(),
    };
    (Client::new(service, namespace), requests)
}

#[derive(Clone)]
struct Counting {
    inner: Client,
    requests: Arc<Requests>,
}

impl Service<Request<Body>> for Counting {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        self.requests
            .sent
            .lock()
            .expect("the request log")
            .push((request.method().clone(), request.uri().path().to_owned()));
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::addresses;

    #[test]
    fn a_path_addresses_its_resource_and_subresource() {
        let status = "/apis/c5c3.io/v1alpha1/namespaces/ns/novacomputes/pool-a/status";
        assert!(addresses(status, "novacomputes", "status"));
        assert!(!addresses(status, "novacomputes", ""));
        let object = "/apis/c5c3.io/v1alpha1/namespaces/ns/novacomputes/pool-a";
        assert!(addresses(object, "novacomputes", ""));
        assert!(!addresses(object, "novacomputes", "status"));
        assert!(addresses(
            "/apis/c5c3.io/v1alpha1/namespaces/ns/novacomputes",
            "novacomputes",
            ""
        ));
        assert!(!addresses(
            "/api/v1/namespaces/ns/events",
            "novacomputes",
            ""
        ));
    }
}
