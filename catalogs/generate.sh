#!/usr/bin/env bash
# Regenerate the nova option catalogs (catalogs/<release>.json).
#   catalogs/generate.sh            rewrite the committed catalogs
#   catalogs/generate.sh --check    regenerate into a temp dir and diff;
#                                   exit 1 with "DRIFT: <file>" on a change
# Other flags (--fresh, --release R) are passed to generate.py; see its header.
# Needs python3 >= 3.11 and PyPI; venvs live outside the repo in
# ${NOVA_CATALOG_CACHE:-~/.cache/nova-operator-catalogs}.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/generate.py" "$@"
