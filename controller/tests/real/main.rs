//! The real tier, one binary: the real node and the real OpenStack, started once per run on
//! first use and shared by every test here (`testkit::stack`), so no release is deployed twice.
//! The harness's own proofs of the node and the OpenStack are here too, beside the operator's
//! suites. Two real binaries stand apart: the node-teardown proof
//! (`tests/tests/real_node_teardown.rs`), which must own the node from start to end, and the
//! chart install (`controller/tests/real_chart`), whose cluster-wide controller would reconcile
//! every Nova the other tests leave behind.

mod apiserver_freeze;
mod chart_scoped;
mod controller_oom;
mod node;
mod nova_data_retention;
mod nova_db_guards;
mod nova_real;
mod novacompute_openstack;
mod novacompute_real;
mod openstack_client;
mod openstack_outages;
mod openstack_proofs;
mod openstack_stalls;
mod pools;
// The controller binary as a process of its own, shared with the kwok tier's leadership
// drills (the real tier uses only what `controller_oom` needs).
#[allow(dead_code)]
#[path = "../kwok/replica.rs"]
mod replica;
