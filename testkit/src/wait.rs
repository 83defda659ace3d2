//! The one bounded wait of the suites. A test waits for state by naming it (a label), bounding
//! it (a timeout) and saying what counts (a probe or a predicate on an object). When the time is
//! up the wait fails with what it last saw and, when it waits about an object, that object's
//! conditions, its recent events and the controller's log lines about its namespace: a failure
//! in CI must be understood from its message alone.
//!
//! The futures a wait drives are boxed: a watch's state is large, and a test's async fn holds
//! every future it awaits inline, on the 2 MiB stack of its test thread.
//!
//! Two forms share the same report: [`Wait::until`] polls a probe (for state that is not one
//! object: an HTTP answer, a metric, an OpenStack listing, several objects at once), and
//! [`Wait::for_object`] follows one object with a watch (kube's `await_condition`).

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::diagnose;

/// Bounds of the default poll interval: a probe is run about 300 times over its timeout, never
/// more often than every 100 ms (the API server and nova-api share two cores with the test)
/// and never less often than every second ([`Wait::every`] sets another).
const FASTEST_POLL: Duration = Duration::from_millis(100);
const SLOWEST_POLL: Duration = Duration::from_secs(1);

/// What a probe answered: the value waited for, or a description of the state it saw instead,
/// which the report shows when the wait gives up.
pub trait Probed<T> {
    fn probed(self) -> Result<T, String>;
}

impl Probed<()> for bool {
    fn probed(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("not yet".into()) }
    }
}

impl<T> Probed<T> for Option<T> {
    fn probed(self) -> Result<T, String> {
        self.ok_or_else(|| "not yet".into())
    }
}

/// A probe that can fail: its error is what it saw (a transient refusal during a drill is
/// retried like any other state until the wait gives up). One error type, so a probe's `?`
/// needs no annotation.
impl<T> Probed<T> for anyhow::Result<Option<T>> {
    fn probed(self) -> Result<T, String> {
        match self {
            Ok(Some(value)) => Ok(value),
            Ok(None) => Err("not yet".into()),
            Err(e) => Err(format!("error: {e:#}")),
        }
    }
}

/// A probe's answer that carries what it saw while the state is not there yet.
pub enum Seen<T> {
    Done(T),
    Saw(String),
}

impl<T> Probed<T> for Seen<T> {
    fn probed(self) -> Result<T, String> {
        match self {
            Seen::Done(value) => Ok(value),
            Seen::Saw(what) => Err(what),
        }
    }
}

/// A wait that gave up: what it waited for, for how long, what it last saw, and the state of
/// the object it waited about.
pub struct Timeout {
    pub label: String,
    pub after: Duration,
    pub seen: String,
    pub report: String,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting for {}; last seen: {}",
            self.after, self.label, self.seen
        )?;
        if !self.report.is_empty() {
            write!(f, "\n{}", self.report)?;
        }
        Ok(())
    }
}

/// `expect` prints the Debug form: make it the readable report.
impl fmt::Debug for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Timeout {}

/// The object a wait is about, for the report.
struct Subject {
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    name: String,
}

/// A labelled, bounded wait.
pub struct Wait {
    label: String,
    timeout: Duration,
    poll: Option<Duration>,
    subject: Option<Subject>,
}

impl Wait {
    /// A wait for `label`, failing after `timeout`.
    pub fn new(label: impl Into<String>, timeout: Duration) -> Self {
        Self {
            label: label.into(),
            timeout,
            poll: None,
            subject: None,
        }
    }

    /// Polls every `interval` instead of the default (about 300 looks over the timeout), for
    /// a wait whose moment matters: a fault that must strike mid-convergence, a duration
    /// that is measured.
    pub fn every(mut self, interval: Duration) -> Self {
        self.poll = Some(interval);
        self
    }

    /// Reports the object `name` of kind `K` in `namespace` (its conditions and events, the
    /// controller log about the namespace) when the wait gives up.
    pub fn about<K>(mut self, client: &Client, namespace: Option<&str>, name: &str) -> Self
    where
        K: Resource<DynamicType = ()>,
    {
        self.subject = Some(Subject {
            client: client.clone(),
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        });
        self
    }

    /// Runs `probe` until it answers with a value; each call is bounded by what is left of the
    /// timeout, so a hung request cannot outlive the wait.
    pub async fn until<T, P, F, Fut>(self, mut probe: F) -> Result<T, Timeout>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = P>,
        P: Probed<T>,
    {
        let started = Instant::now();
        let poll = self
            .poll
            .unwrap_or_else(|| (self.timeout / 300).clamp(FASTEST_POLL, SLOWEST_POLL));
        loop {
            let left = self.timeout.saturating_sub(started.elapsed());
            let seen = match tokio::time::timeout(left.max(FASTEST_POLL), Box::pin(probe())).await {
                Ok(answer) => match answer.probed() {
                    Ok(value) => return Ok(value),
                    Err(what) => what,
                },
                Err(_) => format!("the probe itself did not answer within {left:?}"),
            };
            if started.elapsed() >= self.timeout {
                return Err(self.give_up(seen).await);
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Follows the object `name` of `api` with a watch until `ready` holds for it; returns it.
    pub async fn for_object<K>(
        self,
        api: &Api<K>,
        name: &str,
        ready: impl Fn(&K) -> bool,
    ) -> Result<K, Timeout>
    where
        K: Resource + Clone + fmt::Debug + Send + DeserializeOwned + 'static,
    {
        let condition = |object: Option<&K>| object.is_some_and(&ready);
        let watched = Box::pin(kube::runtime::wait::await_condition(
            api.clone(),
            name,
            condition,
        ));
        match tokio::time::timeout(self.timeout, watched).await {
            Ok(Ok(Some(object))) => Ok(object),
            Ok(Ok(None)) => Err(self.give_up("the object is gone".into()).await),
            Ok(Err(e)) => Err(self.give_up(format!("the watch failed: {e}")).await),
            Err(_) => Err(self.give_up("the predicate never held".into()).await),
        }
    }

    /// Follows the object `name` of `api` with a watch until it is gone.
    pub async fn for_deletion<K>(self, api: &Api<K>, name: &str) -> Result<(), Timeout>
    where
        K: Resource + Clone + fmt::Debug + Send + DeserializeOwned + 'static,
    {
        let gone = |object: Option<&K>| object.is_none();
        let watched = Box::pin(kube::runtime::wait::await_condition(
            api.clone(),
            name,
            gone,
        ));
        match tokio::time::timeout(self.timeout, watched).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.give_up(format!("the watch failed: {e}")).await),
            Err(_) => Err(self.give_up("the object is still there".into()).await),
        }
    }

    async fn give_up(self, seen: String) -> Timeout {
        let report = match &self.subject {
            Some(s) => {
                let api = match &s.namespace {
                    Some(ns) => {
                        Api::<DynamicObject>::namespaced_with(s.client.clone(), ns, &s.resource)
                    }
                    None => Api::<DynamicObject>::all_with(s.client.clone(), &s.resource),
                };
                diagnose::report(&api, &s.client, s.namespace.as_deref(), &s.name).await
            }
            None => String::new(),
        };
        Timeout {
            label: self.label,
            after: self.timeout,
            seen,
            report,
        }
    }
}
