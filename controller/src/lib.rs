//! nova-controller: the Nova and NovaCompute reconcile pipelines and the pure renderers they use.

pub mod bounded;
pub mod clusters;
pub mod crd_currency;
pub mod leadership;
pub mod metrics;
pub mod nova;
pub mod novacompute;
pub mod objects;
pub mod offline;
pub mod openstack;
pub mod pipeline;
pub mod progress;
pub mod ratelimit;
pub mod render;
pub mod sensitive;
pub mod service_proxy;
