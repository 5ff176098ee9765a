#!/usr/bin/env bash
# race-workaround.sh - run the -race workaround of docs/testing.md as a user
# would: in a fresh module outside this repository, with the command the
# docs print, word for word.
#
# Usage:
#   scripts/race-workaround.sh
#
# Copies examples/testing into a temporary directory and makes it the module
# example.com/orderstest (go mod init), with github.com/zkrecipes/zkrecipes
# replaced by a copy of this checkout laid out as the module cache holds a
# module (read-only, no executable bits); go-zookeeper comes as released.
# Then it takes the command from the sh block that follows the marker
# "<!-- race-workaround -->" in docs/testing.md and runs it there, with
# GOWORK unset and a cache directory of its own (XDG_CACHE_HOME; the go
# build cache stays where it was). It checks that
#   - the command passed (ZKTEST_REQUIRED passes through: set it to 1 to
#     fail instead of skipping without ZooKeeper);
#   - the build used go-zookeeper with the patch applied, from the cache
#     directory, not from the module;
#   - no file of the module was added, removed or changed.
# Exits non-zero otherwise. The temporary directory is removed.
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}

die() {
	printf 'race-workaround.sh: %s\n' "$*" >&2
	exit 1
}

# The command, as docs/testing.md prints it.
cmd=$(awk '/<!-- race-workaround -->/ { m = 1; next } m && /^```/ { if (b) exit; b = 1; next } b { print; exit }' "$REPO/docs/testing.md")
[[ -n $cmd ]] || die "docs/testing.md has no sh block after <!-- race-workaround -->"
[[ $cmd == go\ run\ * ]] || die "the documented command is not a go run: $cmd"

export GOWORK=off
GOCACHE=$("$GO" env GOCACHE)
export GOCACHE
tmp=$(mktemp -d "${TMPDIR:-/tmp}/race-workaround.XXXXXX")
trap 'chmod -R u+w -- "$tmp" && rm -rf -- "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"

mod="$tmp/zkrecipes"
mkdir -p -- "$mod"
(
	cd -- "$REPO"
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
		xargs -0 cp --parents -t "$mod" --
)
find "$mod" -type f -exec chmod 0444 {} +
find "$mod" -type d -exec chmod 0555 {} +

user="$tmp/user"
mkdir -p -- "$user"
cp -R -- "$REPO/examples/testing/." "$user/"
cd -- "$user"
"$GO" mod init example.com/orderstest 2>/dev/null
"$GO" mod edit \
	-replace "github.com/zkrecipes/zkrecipes=$mod" \
	-require "github.com/zkrecipes/zkrecipes@v0.0.0-00010101000000-000000000000"
GOFLAGS=-mod=mod "$GO" mod tidy

snapshot() { find . -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(snapshot)

printf 'race-workaround: in %s, running (from docs/testing.md):\n  %s\n' "$user" "$cmd"
bash -c "$cmd"

# Which go-zookeeper the workaround builds with.
zkrace=${cmd%% go *} # "go run github.com/.../cmd/zkrace"
dir=$(bash -c "$zkrace go list -m -f '{{with .Replace}}{{.Dir}}{{end}}' github.com/go-zookeeper/zk")
[[ $dir == "$XDG_CACHE_HOME"/* ]] || die "go-zookeeper came from '$dir', not from the cache directory"
grep -q 'atomic.StoreInt64(&c.lastZxid, res.Zxid)' "$dir/conn.go" || die "$dir/conn.go is not patched"

after=$(snapshot)
if [[ $before != "$after" ]]; then
	diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") >&2 || true
	die "the module's files changed"
fi
printf 'race-workaround: passed with go-zookeeper from %s; the module is unchanged\n' "${dir#"$tmp"/}"
