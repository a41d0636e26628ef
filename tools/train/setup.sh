#!/bin/sh
# Installs the Debian packages tools/train/ needs, only those missing. Run as root (or via sudo).
set -eu
want="python3-torch python3-sentencepiece bible-kjv python3-matplotlib python3-numpy libopenblas0-pthread"
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "setup: all present:$want" >&2
  exit 0
fi
echo "setup: installing$missing" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
