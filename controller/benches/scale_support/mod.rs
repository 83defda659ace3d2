//! The parts of the scale run, one concern per file.

pub mod api_requests;
pub mod controller_process;
pub mod events;
pub mod openstack_double;
pub mod prometheus;
pub mod raw_capacity;
pub mod results;
pub mod webhook_burst;
pub mod world;
