#!/usr/bin/env bash
# patched-zk.sh - build go-zookeeper as this repository's own builds use it.
#
# Usage:
#   scripts/patched-zk.sh
#
# Takes the go-zookeeper release that go.mod requires from the Go module
# proxy (go mod download), copies it to .cache/go-zookeeper-zk, applies
# patches/go-zookeeper-zk-<version>-*.patch there (git apply), and writes
# .cache/go.work, a workspace of this module with a replace of go-zookeeper
# by that copy. The make targets run this script and export
# GOWORK=.cache/go.work, so that tests, tools and examples build against the
# patched client; programs that import zkrecipes get the release as it is.
# By hand: GOWORK=$PWD/.cache/go.work go test -race ./...
#
# Idempotent: when the copy, the patches and go.mod have not changed since
# the last run, it checks a stamp and exits. Needs go and git only.
#
# Environment:
#   GO   the go command (default go)
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
MODULE=github.com/go-zookeeper/zk
CACHE="$REPO/.cache"
DIR="$CACHE/go-zookeeper-zk"
WORK="$CACHE/go.work"
STAMP="$CACHE/go-zookeeper-zk.stamp"

die() {
	printf 'patched-zk.sh: %s\n' "$*" >&2
	exit 1
}

# Our own go commands look at go.mod alone, whatever GOWORK the caller set.
export GOWORK=off

version=$(awk -v m="$MODULE" '$1 == m { print $2 } $1 == "require" && $2 == m { print $3 }' "$REPO/go.mod")
[[ -n $version ]] || die "go.mod does not require $MODULE"
gover=$(awk '$1 == "go" { print $2; exit }' "$REPO/go.mod")
[[ -n $gover ]] || die "go.mod has no go line"

shopt -s nullglob
patches=("$REPO"/patches/go-zookeeper-zk-"$version"-*.patch)
shopt -u nullglob
if ((${#patches[@]} == 0)); then
	die "go.mod requires $MODULE $version, but patches/ holds no go-zookeeper-zk-$version-*.patch;" \
		"port the patch to $version, or delete the patches and this script if $version has the fix"
fi

# The stamp names everything the result depends on.
key=$(printf '%s %s\n' "$version" "$gover"; cat -- "${patches[@]}" "${BASH_SOURCE[0]}" | cksum)
if [[ -f $STAMP && -f $WORK && -d $DIR && $(<"$STAMP") == "$key" ]]; then
	exit 0
fi

mkdir -p -- "$CACHE"
# One run at a time (make -j, two terminals).
exec 9>"$CACHE/.lock"
if command -v flock >/dev/null 2>&1; then
	flock 9
fi

json=$(cd -- "$REPO" && "$GO" mod download -json "$MODULE@$version") ||
	die "go mod download $MODULE@$version failed"
src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
[[ -d $src ]] || die "go mod download gave no directory for $MODULE@$version"

tmp="$DIR.tmp.$$"
trap 'rm -rf -- "$tmp"' EXIT
rm -rf -- "$tmp"
cp -R -- "$src" "$tmp"
chmod -R u+w -- "$tmp" # the module cache is read-only
for p in "${patches[@]}"; do
	# The ceiling keeps git from taking the repository around .cache for
	# the patch's root: paths are relative to the copy.
	(cd -- "$tmp" && GIT_CEILING_DIRECTORIES="$CACHE" git apply -p1 -- "$p") ||
		die "$(basename -- "$p") does not apply to $MODULE $version"
done
rm -f -- "$STAMP"
rm -rf -- "$DIR"
mv -- "$tmp" "$DIR"

cat >"$WORK" <<EOF
// Written by scripts/patched-zk.sh; do not edit. This module, with
// $MODULE $version patched by patches/.
go $gover

use ..

replace $MODULE $version => ./go-zookeeper-zk
EOF
printf '%s\n' "$key" >"$STAMP"
printf 'patched-zk.sh: %s %s with %s in %s\n' "$MODULE" "$version" \
	"${patches[*]#"$REPO"/}" "${DIR#"$REPO"/}" >&2
