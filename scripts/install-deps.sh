#!/usr/bin/env bash
# Installs the Debian packages listed in deps/apt-packages.txt that are not installed yet: those
# above its `[tests]` line, and with --tests also those below it (test and benchmark frameworks,
# fuzzing, headless Chromium). Quiet and quick when everything is present (no apt-get update then).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
with_tests=0
[ "${1:-}" = "--tests" ] && with_tests=1
mapfile -t wanted < <(awk -v t="$with_tests" '
  /^\[tests\]/ { if (!t) exit; next }
  { sub(/#.*/, ""); gsub(/[[:space:]]/, ""); if ($0 != "") print }' "$root/deps/apt-packages.txt")
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
