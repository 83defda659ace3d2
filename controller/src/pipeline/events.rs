//! Publishes the events the passes note, on their CRs.
//!
//! kube-runtime's `Recorder` folds every event of one object, type, reason, action, reporter
//! and related object published within six minutes into the first one's series, keeping the
//! first note. The action is one short verb per reason (`nova_api::events`), so two aggregates
//! created in one pass would be one `AggregateCreated` event naming the first aggregate twice.
//! The note is not among the Recorder's keys, and faking a distinct action or related object
//! per note would misstate what was done. So the [`Publisher`] keeps one Recorder per
//! distinct (reason, note): within its contract each Recorder folds only repeats of its one
//! note, which is exactly a series, while distinct notes stay distinct events. A Recorder
//! unused for the Recorder's own six minutes is dropped, as its series would have expired.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use nova_api::events::EventReason;

use crate::objects::EventNote;

/// How long kube's Recorder keeps a series open.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// The Recorders of the notes published within the series window, each with when it was last
/// used.
type Recorders = HashMap<(EventReason, String), (Recorder, Instant)>;

/// Publishes Kubernetes Events as one reporter, a series per distinct note.
#[derive(Clone)]
pub struct Publisher {
    client: Client,
    reporter: Reporter,
    recorders: Arc<Mutex<Recorders>>,
}

impl Publisher {
    /// A publisher reporting as `reporter` through `client`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            recorders: Arc::default(),
        }
    }

    /// The Recorder of `note`'s reason and text, made on first use; drops those unused for
    /// the series window.
    fn recorder(&self, note: &EventNote) -> Recorder {
        let mut recorders = self
            .recorders
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        recorders.retain(|_, (_, used)| now.duration_since(*used) < SERIES_WINDOW);
        let (recorder, used) = recorders
            .entry((note.reason, note.note.clone()))
            .or_insert_with(|| {
                (
                    Recorder::new(self.client.clone(), self.reporter.clone()),
                    now,
                )
            });
        *used = now;
        recorder.clone()
    }

    /// Publishes `note` on `regarding`: a new event, or the next count of its series when
    /// the same note was published on it within six minutes.
    pub async fn publish(
        &self,
        note: &EventNote,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        self.recorder(note).publish(&note.event(), regarding).await
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use futures::future::BoxFuture;
    use http::{Method, Request, Response};
    use k8s_openapi::api::events::v1::Event;
    use kube::client::Body;
    use tower_service::Service;

    use super::*;

    /// An API server that stores each created event and answers each patch with its body.
    #[derive(Clone, Default)]
    struct Events(Arc<Mutex<Vec<(Method, Event)>>>);

    impl Service<Request<Body>> for Events {
        type Response = Response<Body>;
        type Error = kube::Error;
        type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<Body>) -> Self::Future {
            let seen = self.0.clone();
            Box::pin(async move {
                let method = request.method().clone();
                let body = request.into_body().collect_bytes().await.expect("a body");
                let event: Event = serde_json::from_slice(&body).expect("an event");
                seen.lock().expect("the log").push((method, event));
                Ok(Response::new(Body::from(body.to_vec())))
            })
        }
    }

    fn note(reason: EventReason, text: &str) -> EventNote {
        EventNote {
            reason,
            note: text.to_owned(),
        }
    }

    #[tokio::test]
    async fn distinct_notes_are_distinct_events_and_a_repeated_note_is_a_series() {
        let server = Events::default();
        let publisher = Publisher::new(Client::new(server.clone(), "default"), "test".into());
        let pool = ObjectReference {
            kind: Some("NovaCompute".into()),
            namespace: Some("ns".into()),
            name: Some("pool".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let other = ObjectReference {
            name: Some("other".into()),
            uid: Some("u2".into()),
            ..pool.clone()
        };
        let a = note(EventReason::TraitCreated, "Created custom trait CUSTOM_A");
        let b = note(EventReason::TraitCreated, "Created custom trait CUSTOM_B");
        for (note, on) in [(&a, &pool), (&b, &pool), (&a, &pool), (&a, &other)] {
            publisher.publish(note, on).await.expect("published");
        }
        let seen = server.0.lock().expect("the log").clone();
        let summary: Vec<(Method, Option<String>, Option<i32>)> = seen
            .iter()
            .map(|(m, e)| {
                (
                    m.clone(),
                    e.note.clone(),
                    e.series.as_ref().map(|s| s.count),
                )
            })
            .collect();
        let (a_text, b_text) = (Some(a.note.clone()), Some(b.note.clone()));
        assert_eq!(
            summary,
            [
                (Method::POST, a_text.clone(), None),
                (Method::POST, b_text, None),
                (Method::PATCH, a_text.clone(), Some(2)),
                (Method::POST, a_text, None),
            ],
            "B is not folded into A's series; A again is; A on another object is its own event"
        );
        assert!(
            seen.iter()
                .all(|(_, e)| e.action.as_deref() == Some("Create")),
            "the action is the reason's verb"
        );
    }
}
