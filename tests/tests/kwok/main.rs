//! The harness's kwok tier, one binary: the control plane's own proofs (CRDs, garbage
//! collection, kwok's pod lifecycle, webhooks) and the CRDs' CEL rules on the real API server.

mod cel_rules;
mod control_plane;
mod dev_commands;
