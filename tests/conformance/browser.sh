#!/bin/sh
# A browser for unattended tests: fetches the URL and follows its redirects (to `runbyte
# login`'s loopback listener), as a person's browser would once they approve.
exec python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read()' "$1"
