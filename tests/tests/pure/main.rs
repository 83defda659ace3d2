//! The harness's pure tier: the build scripts' stamps.

mod build_scripts;
