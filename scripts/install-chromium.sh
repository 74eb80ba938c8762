#!/usr/bin/env bash
# Installs headless Chromium from Debian's packages when it is missing: the HTML report's test
# (tests/html_report.rs) renders the report with it and checks the screenshot. Needs root (or
# sudo) and Debian's package archive; prints where Chromium is, or why it could not be installed.
set -euo pipefail
for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then
        echo "chromium: $(command -v "$candidate")"
        exit 0
    fi
done
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: not installed and no apt-get here; install Chromium and put it on PATH" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    sudo="sudo"
fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
echo "chromium: $(command -v chromium)"
