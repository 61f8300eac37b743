#!/usr/bin/env bash
# Google's own system tests of its Python client (tests/system/ of the google-cloud-datastore
# 2.27.0 source distribution, from the Python registry) against the Datastore API at HOST:PORT.
# Writes the ids of the tests that failed or errored, sorted, to OUT (the log to OUT.log) and
# prints pytest's summary.
#
#   server/clients/system_tests.sh HOST:PORT PROJECT OUT
#   server/clients/system_tests.sh --prepare     # installs the client and the tests, runs none
set -euo pipefail
prepare=
if [ "${1:-}" = --prepare ]; then
  prepare=1
else
  host=$1 project=$2 out=$3
  case $out in /*) ;; *) out=$PWD/$out ;; esac
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
venv=$target/ndb-venv
python=$venv/bin/python
if ! "$python" -c "import google.cloud.ndb, google.cloud.datastore" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q google-cloud-ndb==2.7.1 google-cloud-datastore==2.27.0
fi
"$python" -c "import pytest, test_utils" 2>/dev/null \
  || "$venv/bin/pip" install -q pytest==8.3.5 google-cloud-testutils==1.6.4
dir=$target/datastore-system-tests
src=$dir/google_cloud_datastore-2.27.0
if [ ! -d "$src/tests/system" ]; then
  mkdir -p "$dir"
  "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$dir" google-cloud-datastore==2.27.0
  tar xzf "$dir/google_cloud_datastore-2.27.0.tar.gz" -C "$dir"
fi
[ -n "$prepare" ] && exit 0
cd "$src"
# SYSTEM_TESTS_DATABASE="" selects the default database; nothing reaches Google's metadata
# server.
DATASTORE_EMULATOR_HOST=$host DATASTORE_DATASET=$project SYSTEM_TESTS_DATABASE="" \
  METADATA_SERVER_DETECTION=none GCE_METADATA_HOST=127.0.0.1:9 \
  "$python" -m pytest tests/system -q --no-header -p no:cacheprovider -W ignore -rfE --tb=no \
  >"$out.log" 2>&1 || true
grep -E '^(FAILED|ERROR) ' "$out.log" | sed 's/ - .*//; s/^FAILED //; s/^ERROR //' | sort -u >"$out"
tail -1 "$out.log"
