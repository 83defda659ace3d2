//! The webhook's kwok tier, one binary: the real `nova-webhook` process registered with the
//! real API server (every create and update through real admission, as `kubectl apply` would),
//! and the drills that kill and re-certify it under load.

mod certificates;
mod drills;
mod e2e;
mod log_filter;
