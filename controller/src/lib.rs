//! nova-controller: the Nova and NovaCompute reconcile pipelines and the pure renderers they use.

pub mod backoff;
pub mod context;
pub mod derived_secret;
pub mod external;
pub mod metrics;
pub mod nova;
pub mod offline;
pub mod pipeline;
pub mod render;
pub mod sensitive;
