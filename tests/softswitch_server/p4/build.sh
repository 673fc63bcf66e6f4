#!/bin/sh
# Rebuild the committed p4c outputs of the server test program (needs p4c-bm2-ss on PATH).
set -eu
cd "$(dirname "$0")"
p4c-bm2-ss --arch v1model --std p4-16 -o server_test.json \
    --p4runtime-files server_test.p4info.txt server_test.p4
p4c-bm2-ss --version > server_test.p4c-version.txt 2>&1
