//! nova-api's pure tier, one binary: the generated CRDs and the samples.

mod crds;
mod samples;
