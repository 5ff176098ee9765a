#!/usr/bin/env bash
# outside-module.sh - run examples/testing as a user's module would.
#
# Usage:
#   scripts/outside-module.sh [--patched] [--runs N] [-- GO-TEST-FLAGS...]
#
# Copies examples/testing into a temporary directory, makes it the module
# example.com/orderstest (go mod init), points github.com/zkrecipes/zkrecipes
# with a replace at a copy of this checkout's files laid out as the module
# cache holds a module (read-only, no executable bits, so zktest must start
# its servers without the repository's scripts), runs go mod tidy, then
# go test -race -count=1 ./... there, outside this repository and with
# GOWORK=off, so that nothing of the repository's own set-up (internal
# packages, .cache/go.work) can help. ZKTEST_REQUIRED passes through: set it
# to 1 to fail instead of skipping when no ZooKeeper is found.
#
#   --patched  also replace github.com/go-zookeeper/zk by the copy with
#              patches/ applied (.cache/go-zookeeper-zk, made by
#              scripts/patched-zk.sh); without it the module gets
#              go-zookeeper as released.
#   --runs N   run the tests N times (default 1) and count the runs in
#              which the race detector reported a DATA RACE.
#   --         the rest is added to go test's flags (e.g. -run, -v).
#
# Exits non-zero if a run failed. The temporary directory is removed.
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
patched=0
runs=1
flags=()

die() {
	printf 'outside-module.sh: %s\n' "$*" >&2
	exit 2
}

while (($#)); do
	case $1 in
	--patched) patched=1 ;;
	--runs)
		[[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"
		runs=$2
		shift
		;;
	--)
		shift
		flags=("$@")
		break
		;;
	*) die "unknown argument $1 (see the comment at the top of this script)" ;;
	esac
	shift
done

zkcopy="$REPO/.cache/go-zookeeper-zk"
if ((patched)) && [[ ! -f $zkcopy/go.mod ]]; then
	die "$zkcopy is missing: run scripts/patched-zk.sh (make patched-zk) first"
fi

export GOWORK=off
tmp=$(mktemp -d "${TMPDIR:-/tmp}/outside-module.XXXXXX")
trap 'chmod -R u+w -- "$tmp" && rm -rf -- "$tmp"' EXIT

# The module as the module cache holds it: its files only, read-only,
# without executable bits.
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

mkdir -p -- "$tmp/user"
cp -R -- "$REPO/examples/testing/." "$tmp/user/"
cd -- "$tmp/user"

"$GO" mod init example.com/orderstest 2>/dev/null
"$GO" mod edit \
	-replace "github.com/zkrecipes/zkrecipes=$mod" \
	-require "github.com/zkrecipes/zkrecipes@v0.0.0-00010101000000-000000000000"
label="go-zookeeper as released"
if ((patched)); then
	"$GO" mod edit -replace "github.com/go-zookeeper/zk=$zkcopy"
	label="go-zookeeper patched by patches/"
fi
GOFLAGS=-mod=mod "$GO" mod tidy

failed=0
raced=0
for ((i = 1; i <= runs; i++)); do
	out="$tmp/user/run-$i.log"
	rc=0
	"$GO" test -race -count=1 "${flags[@]}" ./... >"$out" 2>&1 || rc=$?
	cat -- "$out"
	what="passed"
	if grep -q 'DATA RACE' -- "$out"; then
		raced=$((raced + 1))
		what="data race"
	fi
	if ((rc != 0)); then
		failed=$((failed + 1))
		[[ $what == passed ]] && what="failed"
	fi
	((runs == 1)) || printf 'outside-module: run %d of %d: %s\n' "$i" "$runs" "$what"
done

printf 'outside-module: %d run%s, %d with a data race report, %d failed (%s)\n' \
	"$runs" "$([[ $runs == 1 ]] || echo s)" "$raced" "$failed" "$label"
((failed == 0))
