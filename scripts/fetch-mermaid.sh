#!/usr/bin/env bash
# The browser tests render `uwf workflow graph` / `uwf thread graph` Mermaid text with the real
# Mermaid, as GitHub does. This fetches the pinned build from the npm registry into
# .cache/mermaid/ (ignored by git, never shipped: the web view draws its SVG on the server) and
# checks its sha256. Idempotent: a present file with the right hash is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=12.3.0
SHA256=336df803d87a38b70a01e736e666c8f7601d2ce42f5e47c8fafe5d721074b9a3
DEST=.cache/mermaid
FILE="$DEST/mermaid-$VERSION.min.js"

if [ -f "$FILE" ] && echo "$SHA256  $FILE" | sha256sum --check --status; then
  exit 0
fi
mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "mermaid@$VERSION" >/dev/null 2>&1)
tar -xzf "$work/mermaid-$VERSION.tgz" -C "$work" package/dist/mermaid.min.js package/LICENSE
if ! echo "$SHA256  $work/package/dist/mermaid.min.js" | sha256sum --check --status; then
  echo "error: mermaid@$VERSION dist/mermaid.min.js does not have the pinned sha256" >&2
  exit 1
fi
cp "$work/package/LICENSE" "$DEST/LICENSE"
mv "$work/package/dist/mermaid.min.js" "$FILE"
