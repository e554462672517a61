#!/bin/sh
# The client under test for the conformance suite's client scenarios: Runbyte's Hub, through
# `runbyte probe` (connect to the URL the suite appends, list the tools, call each; questions are
# answered unattended). The suite names the revision to speak and, for some scenarios, the calls
# to make, in its environment; this maps them to probe's flags.
#   conformance client --command "tests/conformance/client.sh <runbyte> <runbyte.toml>" --requirements R
runbyte=$1
config=$2
shift 2
if [ -n "$MCP_CONFORMANCE_CONTEXT" ]; then
  exec "$runbyte" --config "$config" probe --protocol "${MCP_CONFORMANCE_PROTOCOL_VERSION:-auto}" --calls "$MCP_CONFORMANCE_CONTEXT" "$@"
fi
exec "$runbyte" --config "$config" probe --protocol "${MCP_CONFORMANCE_PROTOCOL_VERSION:-auto}" "$@"
