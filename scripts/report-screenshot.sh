#!/usr/bin/env bash
# Renders the HTML report of a built-in scenario in headless Chromium and saves a screenshot:
#   scripts/report-screenshot.sh [SCENARIO] [PNG]
# (default: bg-write-fg-read, docs/img/report-bg-write-fg-read.png). Installs Chromium first
# when it is missing (scripts/install-chromium.sh). Builds the release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="${1:-bg-write-fg-read}"
png="${2:-docs/img/report-$(echo "$scenario" | tr / -).png}"
scripts/install-chromium.sh >/dev/null
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome)"
cargo build --release --locked -q
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
target/release/mobistack run "$scenario" --html "$work/report.html" >/dev/null
mkdir -p "$(dirname "$png")"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --window-size=1300,4400 --user-data-dir="$work/profile" --screenshot="$png" \
    "file://$work/report.html" >/dev/null 2>&1
echo "screenshot: $png"
