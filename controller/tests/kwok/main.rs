//! The controller's kwok tier, one binary: every suite that needs the real API server with
//! kwok playing the nodes. Most tests share the binary's one control plane
//! (`testkit::shared()`), each in namespaces of its own, and run in parallel. Those that read
//! the API server's whole-server request counters (`nova_steady_state`, `novacompute_pool`),
//! kill or freeze it (`fault_drills`), read its audit log (`leadership_drills`) or need a second
//! cluster (`target_clusters`) or none of the project's CRDs (`crd_lifecycle`) start a control
//! plane of their own beside it.

mod chart;
mod cluster_handle;
mod crd_lifecycle;
mod fault_drills;
mod leader_election;
mod leadership_drills;
mod nova_config;
mod nova_credentials;
mod nova_data_retention;
mod nova_database;
mod nova_lifecycle;
mod nova_pause;
mod nova_steady_state;
mod nova_workloads;
mod novacompute_pool;
mod novacompute_tls;
mod pass_deadline;
mod replica;
mod target_clusters;
mod webhook_down;
