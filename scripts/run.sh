#!/usr/bin/env bash
# The main job: generates the CRDs from the API types and prints them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo run --locked -q -p nova-api --bin crdgen
cat crds/*.yaml
