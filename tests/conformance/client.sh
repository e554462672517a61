#!/bin/sh
# The client under test for the conformance suite's client scenarios: Runbyte's Hub, through
# `runbyte probe` (connect to the URL the suite appends, list the tools, call each; questions are
# answered unattended). The suite names the revision to speak and, for some scenarios, the calls
# to make, in its environment; this maps them to probe's flags.
#
# Authorization scenarios (`auth/*`): probe logs in on the spot as `runbyte login` would, and
# `BROWSER` is tests/conformance/browser.sh, which follows the authorization URL to probe's
# loopback redirect the way a person's browser would (the suite's authorization server approves
# at once). The client settings a user would write in runbyte.toml come from the suite's
# context: a pre-registered `client-id`/`client-secret`, the client ID metadata document's URL,
# and for the client-credentials scenario `auth = "client-credentials"`.
#   conformance client --command "tests/conformance/client.sh <runbyte> <runbyte.toml>" --requirements R
runbyte=$1
config=$2
shift 2
here=$(dirname "$0")
set -- --protocol "${MCP_CONFORMANCE_PROTOCOL_VERSION:-auto}" "$@"
case "$MCP_CONFORMANCE_SCENARIO" in
  auth/*)
    BROWSER="$here/browser.sh"
    export BROWSER
    set -- "$@" --client-metadata-url https://conformance-test.local/client-metadata.json
    field() {
      printf '%s' "$MCP_CONFORMANCE_CONTEXT" | python3 -c \
        'import json,sys; v=(json.loads(sys.stdin.read() or "{}")).get(sys.argv[1]); print(v if isinstance(v,str) else "")' "$1" 2>/dev/null
    }
    id=$(field client_id)
    secret=$(field client_secret)
    [ -n "$id" ] && set -- "$@" --client-id "$id"
    [ -n "$secret" ] && set -- "$@" --client-secret "$secret"
    case "$MCP_CONFORMANCE_SCENARIO" in
      auth/client-credentials-*) set -- "$@" --auth client-credentials ;;
    esac
    exec "$runbyte" --config "$config" probe "$@"
    ;;
esac
if [ -n "$MCP_CONFORMANCE_CONTEXT" ]; then
  exec "$runbyte" --config "$config" probe --calls "$MCP_CONFORMANCE_CONTEXT" "$@"
fi
exec "$runbyte" --config "$config" probe "$@"
