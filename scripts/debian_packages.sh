# shellcheck shell=bash
# Sourced by setup.sh and fuzz.sh (under `set -euo pipefail`), which install their packages alike.
# install_missing_packages LABEL PACKAGE...: installs with apt-get the Debian packages that are not
# installed yet, saying "LABEL: installing N packages: ..." first and how long it took after,
# through sudo when not root; nothing, and quiet, when none is missing. A failing apt-get ends
# the calling script (its set -e).
install_missing_packages() {
  local label=$1
  shift
  local package missing=() sudo=""
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  local started=$SECONDS
  echo "$label: installing ${#missing[@]} Debian package(s) with apt-get: ${missing[*]}"
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "$label: installed them in $((SECONDS - started))s"
}
