//! The real tier's chart install, in a binary of its own: a cluster-wide install reconciles
//! every Nova and pool of the cluster, so it must not meet what the other real tests leave in
//! theirs (it needs the node, not the OpenStack, so nothing is deployed twice).

mod cert_manager_renewal;
mod certificate_drills;
mod chart_install;
mod webhook_flood;
