//! Admission load for the webhook drills of the kwok and real tiers: clients that create and
//! update Novas and try an invalid one (a name ending in `-api`, which only the webhook
//! rejects) as fast as the API server answers, every outcome tallied per named phase the test
//! switches while they run. A drill then checks that no request was refused (the API server
//! could not call or trust the webhook) where a working webhook was expected.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use nova_test_harness::local_webhook::{example_named, nova_resource};
use serde_json::{Value, json};

use crate::fixtures::{EXAMPLE_NOVA_YAML, schemas_of};

/// How many clients send requests at once.
const CLIENTS: usize = 8;
/// The API server's text when a failing-closed webhook cannot be called.
pub const REFUSED: &str = "failed calling webhook";
/// The webhook's own denial of the invalid Nova.
pub const DENIED: &str = "name must not end in \"-api\"";
/// The webhook's own fail-closed answer when its schema-claim lookup (a cluster-wide list of
/// Novas) times out on a loaded machine: the webhook was called and answered, so it is no
/// refusal of admission, but it is not the verdict either; counted and printed apart.
const LOOKUP_TIMEOUT: &str = "the Kubernetes API did not answer within";

/// What one request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    CreateValid,
    UpdateValid,
    CreateInvalid,
}

/// How the API server answered.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Admitted,
    /// Refused because the webhook could not be called (failurePolicy Fail).
    Refused,
    /// Denied by the webhook.
    Denied,
    /// Anything else, with the API server's message.
    Other(String),
}

/// Outcomes per (phase, op); a request whose phase changed while it was in flight counts
/// under [`IN_FLIGHT_ACROSS`].
pub type Tally = BTreeMap<(&'static str, Op, Outcome), usize>;
pub const IN_FLIGHT_ACROSS: &str = "across a phase change";

/// The named phases of a drill, switched by the test while the clients run.
pub struct Phases {
    names: &'static [&'static str],
    current: AtomicUsize,
}

impl Phases {
    /// The phases `names`, the first one entered.
    pub fn new(names: &'static [&'static str]) -> Arc<Self> {
        Arc::new(Self {
            names,
            current: AtomicUsize::new(0),
        })
    }

    pub fn names(&self) -> &'static [&'static str] {
        self.names
    }

    pub fn enter(&self, name: &str) {
        let index = self
            .names
            .iter()
            .position(|n| *n == name)
            .expect("a named phase");
        self.current.store(index, Ordering::SeqCst);
        eprintln!("drill: phase {name}");
    }

    fn index(&self) -> usize {
        self.current.load(Ordering::SeqCst)
    }
}

/// What the clients' valid requests store.
#[derive(Clone, Debug)]
pub enum Writes {
    /// Creates are stored, and each client updates the last Nova it created (the kwok
    /// drills, where stored Novas prove what the webhook admitted).
    Stored,
    /// Server-side dry runs (admission runs, nothing is stored, no controller works): creates,
    /// and updates of the existing Nova named here (the real tier, where a controller
    /// reconciles every stored Nova).
    DryRun { update: String },
}

/// The clients hammering the API server until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// [`CLIENTS`] clients sending requests into `ns` with stored writes.
    pub fn start(client: &kube::Client, ns: &str, phases: &Arc<Phases>) -> Self {
        Self::start_with(client, ns, phases, Writes::Stored)
    }

    /// [`CLIENTS`] clients sending requests into `ns`, with `writes`.
    pub fn start_with(
        client: &kube::Client,
        ns: &str,
        phases: &Arc<Phases>,
        writes: Writes,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Mutex::new(Tally::new()));
        let novas: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &nova_resource("Nova", "novas"));
        let clients = (0..CLIENTS)
            .map(|id| {
                let (novas, ns, stop, tally, phases, writes) = (
                    novas.clone(),
                    ns.to_owned(),
                    stop.clone(),
                    tally.clone(),
                    phases.clone(),
                    writes.clone(),
                );
                tokio::spawn(async move {
                    let mut sender = Sender {
                        novas,
                        ns,
                        id,
                        writes,
                        created: None,
                    };
                    let mut i = 0usize;
                    while !stop.load(Ordering::SeqCst) {
                        let before = phases.index();
                        let (op, outcome) = sender.request(i).await;
                        let after = phases.index();
                        let phase = if before == after {
                            phases.names[before]
                        } else {
                            IN_FLIGHT_ACROSS
                        };
                        *tally
                            .lock()
                            .expect("tally")
                            .entry((phase, op, outcome))
                            .or_default() += 1;
                        i += 1;
                    }
                })
            })
            .collect();
        Self {
            stop,
            tally,
            clients,
        }
    }

    /// Stops the clients and returns (and prints) what they saw.
    pub async fn finish(self) -> Tally {
        self.stop.store(true, Ordering::SeqCst);
        for client in self.clients {
            client.await.expect("a load client");
        }
        let tally = self.tally.lock().expect("tally").clone();
        for ((phase, op, outcome), n) in &tally {
            eprintln!("drill: {phase:>24} {op:?} {outcome:?}: {n}");
        }
        tally
    }
}

/// One load client.
struct Sender {
    novas: Api<DynamicObject>,
    ns: String,
    id: usize,
    writes: Writes,
    /// The last Nova this client stored.
    created: Option<String>,
}

impl Sender {
    /// Request `i`: a valid create, an update (removing the defaulted username and changing
    /// the region), or the invalid create.
    async fn request(&mut self, i: usize) -> (Op, Outcome) {
        let (id, dry_run) = (self.id, matches!(self.writes, Writes::DryRun { .. }));
        let post = PostParams {
            dry_run,
            ..PostParams::default()
        };
        let target = match &self.writes {
            Writes::Stored => self.created.clone(),
            Writes::DryRun { update } => Some(update.clone()),
        };
        let result = match (i % 3, target) {
            (2, _) => {
                let nova = example_named(EXAMPLE_NOVA_YAML, &format!("x{id}-{i}-api"), &self.ns)
                    .expect("the Example");
                (
                    Op::CreateInvalid,
                    self.novas.create(&post, &object(nova)).await,
                )
            }
            (1, Some(name)) => {
                let edit = Patch::Merge(
                    json!({"spec": {"serviceUser": {"username": null}, "region": format!("R{i}")}}),
                );
                let params = PatchParams {
                    dry_run,
                    ..PatchParams::default()
                };
                (
                    Op::UpdateValid,
                    self.novas.patch(&name, &params, &edit).await,
                )
            }
            _ => {
                let name = format!("d{id}-{i}");
                let nova = nova_with_own_schemas(&name, &self.ns);
                let result = self.novas.create(&post, &object(nova)).await;
                if result.is_ok() && !dry_run {
                    self.created = Some(name);
                }
                (Op::CreateValid, result)
            }
        };
        let outcome = match result.1 {
            Ok(_) => Outcome::Admitted,
            Err(kube::Error::Api(status)) if status.message.contains(REFUSED) => Outcome::Refused,
            Err(kube::Error::Api(status)) if status.message.contains(DENIED) => Outcome::Denied,
            Err(e) => Outcome::Other(e.to_string()),
        };
        (result.0, outcome)
    }
}

fn object(nova: Value) -> DynamicObject {
    serde_json::from_value(nova).expect("a Nova object")
}

/// The Example as written (the webhook fills its defaults) named `name` in `ns`, on the schemas
/// [`own_schemas`](crate::fixtures::own_schemas) gives it: the webhook's claim check refuses a
/// second Nova on the Example's.
pub fn nova_with_own_schemas(name: &str, ns: &str) -> Value {
    let mut nova = example_named(EXAMPLE_NOVA_YAML, name, ns).expect("the Example");
    let (api, cell) = schemas_of(name);
    nova["spec"]["apiDatabase"]["database"] = json!(api);
    nova["spec"]["database"]["database"] = json!(cell);
    nova
}

/// The requests of `phase` that did not get the answer a working webhook gives.
pub fn wrong_while_up(tally: &Tally, phase: &str) -> Vec<String> {
    tally
        .iter()
        .filter(|((p, op, outcome), _)| {
            *p == phase
                && match op {
                    Op::CreateInvalid => *outcome != Outcome::Denied,
                    Op::CreateValid | Op::UpdateValid => *outcome != Outcome::Admitted,
                }
        })
        .map(|((p, op, outcome), n)| format!("{p}: {op:?} {outcome:?} x{n}"))
        .collect()
}

/// How many requests `phase` saw.
pub fn count(tally: &Tally, phase: &str) -> usize {
    tally
        .iter()
        .filter(|((p, _, _), _)| *p == phase)
        .map(|(_, n)| n)
        .sum()
}

/// Every phase saw requests, none was refused (the API server could not call or trust the
/// webhook), and every one got the answer of a working webhook but for lookup timeouts, which
/// are printed.
pub fn assert_nothing_refused(tally: &Tally, phases: &[&str]) {
    let (lookups, mut wrong): (Vec<String>, Vec<String>) = phases
        .iter()
        .flat_map(|p| wrong_while_up(tally, p))
        .partition(|w| w.contains(LOOKUP_TIMEOUT));
    wrong.extend(
        tally
            .iter()
            .filter(|((_, _, outcome), _)| *outcome == Outcome::Refused)
            .map(|((p, op, outcome), n)| format!("{p}: {op:?} {outcome:?} x{n}")),
    );
    for phase in phases {
        assert!(count(tally, phase) > 0, "no request in phase {phase}");
    }
    eprintln!(
        "drill: {} refused, {} answered fail-closed for a lookup timeout",
        wrong.len(),
        lookups.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Lets the load run through the current phase: each phase lasts a few seconds on purpose, so
/// every phase sees requests (a duration, not a wait for state).
pub async fn load_for(length: Duration) {
    tokio::time::sleep(length).await;
}
