//! The controller's pure tier, one binary: the renderers' golden, contract and property tests,
//! and the main job's condition view fed the controller's own output. No cluster, no network.

mod layering;
mod main_job_view;
mod render_contract;
mod render_golden;
mod render_properties;
mod render_support;
mod render_workloads;
mod steps_write_through_plans;
