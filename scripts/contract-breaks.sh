#!/usr/bin/env bash
# contract-breaks.sh - show that each contract test catches the break it
# pins.
#
# Usage:
#   scripts/contract-breaks.sh [NAME...]
#
# The wire tap rests on how go-zookeeper uses its connection; the
# contract tests (recipe/internal/transport/contract_test.go) pin each
# assumption on the version in go.mod. For each
# recipe/internal/transport/testdata/contract/NAME.patch (all of them by
# default), this copies go-zookeeper as the repository builds it
# (.cache/go-zookeeper-zk, from scripts/patched-zk.sh), applies the patch
# (a deliberate break of one assumption), builds the transport's tests against
# it and runs the contract test the patch names on its "Breaks:" line,
# which must fail. It runs every contract test on the unbroken copy first,
# which must pass. A server comes from zktest, as for make test.
# Exits non-zero if any test passes with its break or fails without.
#
# Environment:
#   GO   the go command (default go)
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
cd -- "$REPO"
pkg=./recipe/internal/transport/
patches=recipe/internal/transport/testdata/contract

GO=$GO scripts/patched-zk.sh
base="$REPO/.cache/go-zookeeper-zk"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

# workspace DIR writes a go.work of this module with go-zookeeper replaced
# by DIR, and prints its path.
workspace() {
	local dir=$1 version gover
	version=$(awk '$1 == "github.com/go-zookeeper/zk" { print $2 }' go.mod)
	gover=$(awk '$1 == "go" { print $2; exit }' go.mod)
	printf 'go %s\n\nuse %s\n\nreplace github.com/go-zookeeper/zk %s => %s\n' "$gover" "$REPO" "$version" "$dir" >"$dir.work"
	echo "$dir.work"
}

export ZKTEST_REQUIRED=${ZKTEST_REQUIRED:-1}
status=0

echo "== unbroken: every contract test must pass"
if ! GOWORK=$base/../go.work "$GO" test -count=1 -run '^TestContract' "$pkg" >"$tmp/unbroken.log" 2>&1; then
	cat "$tmp/unbroken.log"
	echo "FAIL: the contract tests fail on go-zookeeper as the repository builds it"
	status=1
fi

if (($# == 0)); then
	set -- $(cd "$patches" && ls -- *.patch | sed 's/\.patch$//')
fi
for name in "$@"; do
	patch="$REPO/$patches/$name.patch"
	test=$(awk '$1 == "Breaks:" { print $2; exit }' "$patch")
	[[ -n $test ]] || { echo "$name: no Breaks: line"; status=1; continue; }
	copy="$tmp/$name"
	cp -R -- "$base" "$copy"
	chmod -R u+w -- "$copy"
	(cd -- "$copy" && git apply -- "$patch")
	work=$(workspace "$copy")
	start=$SECONDS
	if GOWORK=$work "$GO" test -count=1 -timeout 3m -run "^$test\$" "$pkg" >"$tmp/$name.log" 2>&1; then
		echo "FAIL: $name: $test passed with the break ($((SECONDS - start))s)"
		status=1
	elif grep -q -- "--- FAIL: $test" "$tmp/$name.log"; then
		why=$(grep -m1 -A1 -- "--- FAIL: $test" "$tmp/$name.log" | tail -1 | sed 's/^ *//')
		echo "ok: $name: $test fails ($((SECONDS - start))s): $why"
	else
		tail -20 "$tmp/$name.log"
		echo "FAIL: $name: the build or the run failed before $test could"
		status=1
	fi
	rm -rf -- "$copy"
done
exit $status
