package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var baselineRev = flag.String("baseline.rev", "", "run TestBaselineBuild and TestBaselineRun with this revision as the baseline (e.g. HEAD~1; about 30 s)")

func TestCheckRev(t *testing.T) {
	for _, rev := range []string{"HEAD", "HEAD~1", "HEAD^", "bd6e1af", "main", "v0.3.0", "origin/main", "issue-bench@{1}", "17d56a8^{commit}"} {
		if err := checkRev(rev); err != nil {
			t.Errorf("checkRev(%q) = %v, want nil", rev, err)
		}
	}
	for _, rev := range []string{"", "-", "--output=/tmp/x", "-Xfoo", "a..b", "a...b", "HEAD:go.mod", "a b", "a\nb", "$(id)", "a;b", ".hidden", "HEAD\x00"} {
		if err := checkRev(rev); err == nil {
			t.Errorf("checkRev(%q) = nil, want an error", rev)
		}
	}
}

func TestParseFlagsBaseline(t *testing.T) {
	cfg, err := parseFlags([]string{"-suite", "peers", "-baseline", "HEAD~1"})
	if err != nil || cfg.baseline != "HEAD~1" {
		t.Fatalf("parseFlags = %q, %v; want HEAD~1", cfg.baseline, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-baseline", "HEAD~1"}, "only the peers suite"},
		{[]string{"-suite", "scale", "-baseline", "HEAD~1"}, "only the peers suite"},
		{[]string{"-suite", "peers", "-baseline", "--upload-pack=x"}, "not a revision"},
		{[]string{"-suite", "peers", "-baseline", "HEAD~3..HEAD"}, "not a range"},
	} {
		if _, err := parseFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestWithBaseline(t *testing.T) {
	ids := func(ss []scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.id)
		}
		return out
	}
	all := peerSuite()
	for _, id := range baselineIDs {
		i := slices.IndexFunc(all, func(s scenario) bool { return s.id == id })
		if i < 0 {
			t.Fatalf("the peers suite has no %s", id)
		}
		// In the group of ours, titled so that preparePeers builds it.
		s := all[i]
		if s.run == nil || s.group == "" || !strings.HasPrefix(s.title, peerBaseline+" ") {
			t.Errorf("%s: %+v, want a peer run in a group, titled %q...", id, s, peerBaseline)
		}
	}

	got, err := withBaseline(all, config{suite: "peers"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all)-len(baselineIDs) || slices.ContainsFunc(ids(got), func(id string) bool { return slices.Contains(baselineIDs, id) }) {
		t.Errorf("without -baseline: %v, want every scenario but the baseline's", ids(got))
	}
	if got, _ := withBaseline(all, config{suite: "peers", baseline: "HEAD"}); len(got) != len(all) {
		t.Errorf("with -baseline: %d scenarios, want all %d", len(got), len(all))
	}

	only, err := selectScenarios("peers", "mutex,baseline-mutex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withBaseline(only, config{suite: "peers", only: "mutex,baseline-mutex"}); err == nil || !strings.Contains(err.Error(), "-baseline") {
		t.Errorf("-only baseline-mutex without -baseline: %v, want an error naming -baseline", err)
	}
	if got, err := withBaseline(only, config{suite: "peers", only: "mutex,baseline-mutex", baseline: "HEAD"}); err != nil || !slices.Equal(ids(got), []string{"mutex", "baseline-mutex"}) {
		t.Errorf("-only with -baseline: %v, %v", ids(got), err)
	}

	p := &peerPrograms{}
	if _, err := p.command(peerBaseline, nil); err != errNoBaseline {
		t.Errorf("command without a built baseline: %v, want errNoBaseline", err)
	}
	p.baseline = &baselinePeer{binary: "/x/gopeer"}
	if argv, err := p.command(peerBaseline, []string{"-zk", "a"}); err != nil || !slices.Equal(argv, []string{"/x/gopeer", "-zk", "a"}) {
		t.Errorf("command = %q, %v", argv, err)
	}
}

func TestGoWorkFile(t *testing.T) {
	var w workspace
	if err := json.Unmarshal([]byte(`{"Go": "1.26.0", "Use": [{"DiskPath": ".."}], "Replace": [
		{"Old": {"Path": "github.com/go-zookeeper/zk", "Version": "v1.0.4"}, "New": {"Path": "./go-zookeeper-zk"}},
		{"Old": {"Path": "github.com/zkrecipes/zkrecipes"}, "New": {"Path": "../elsewhere"}},
		{"Old": {"Path": "example.com/m"}, "New": {"Path": "example.com/fork", "Version": "v1.2.3"}}]}`), &w); err != nil {
		t.Fatal(err)
	}
	w.path = "/repo/.cache/go.work"
	got := goWorkFile(newestGo("1.25", w.Go), "/repo/.cache/bench-baseline-1/src dir", w.replaces())
	want := `// Written by internal/bench for -baseline; removed at the end of the run.
go 1.26.0

use "/repo/.cache/bench-baseline-1/src dir"

replace github.com/go-zookeeper/zk => /repo/.cache/go-zookeeper-zk

replace example.com/m => example.com/fork v1.2.3
`
	if got != want {
		t.Errorf("goWorkFile:\n%s\nwant:\n%s", got, want)
	}
	if got := goWorkFile("", "/s", nil); strings.Contains(got, "\ngo ") || !strings.Contains(got, "use /s\n") {
		t.Errorf("goWorkFile without a go version or replaces:\n%s", got)
	}

	for _, tc := range []struct{ a, b, want string }{
		{"1.26.0", "1.25", "1.26.0"},
		{"1.24", "1.26.0", "1.26.0"},
		{"1.26.0", "", "1.26.0"},
		{"junk", "1.25", "1.25"},
		{"", "", ""},
	} {
		if got := newestGo(tc.a, tc.b); got != tc.want {
			t.Errorf("newestGo(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct{ mod, wantModule, wantGo string }{
		{"module github.com/zkrecipes/zkrecipes\n\ngo 1.26.0\n\nrequire (\n\tx v1\n)\n", modulePath, "1.26.0"},
		{"// c\nmodule \"example.com/x\"\ngo 1.22\n", "example.com/x", "1.22"},
		{"", "", ""},
		{"module\ngo\n", "", ""},
	} {
		if m, g := modFileLines([]byte(tc.mod)); m != tc.wantModule || g != tc.wantGo {
			t.Errorf("modFileLines(%q) = %q, %q; want %q, %q", tc.mod, m, g, tc.wantModule, tc.wantGo)
		}
	}
}

// TestBaselineBuild builds the Go peer at -baseline.rev and checks that it
// is built against the go-zookeeper the runner's workspace uses, and that
// close removes everything it wrote.
func TestBaselineBuild(t *testing.T) {
	if *baselineRev == "" {
		t.Skip("builds the module at a revision: go test -run TestBaseline ./internal/bench -args -baseline.rev HEAD~1")
	}
	b, err := buildBaseline(*baselineRev, defaultPeersDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if len(b.commit) < 40 || !strings.HasPrefix(b.dir, filepath.Join(repoRoot(t), ".cache")+string(filepath.Separator)) {
		t.Errorf("commit %q, dir %q: want a full hash and a directory under .cache/", b.commit, b.dir)
	}
	out, err := exec.Command(goCommand(), "version", "-m", b.binary).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v %s", err, out)
	}
	w, err := goWorkspace(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range w.replaces() {
		if !bytes.Contains(out, []byte("=>\t"+r.new+"\t")) {
			t.Errorf("the baseline's peer is not built with %s => %s:\n%s", r.old, r.new, out)
		}
	}
	if !bytes.Contains(out, []byte(modulePath+"/mutex")) && !bytes.Contains(out, []byte("mod\t"+modulePath)) {
		t.Errorf("the peer is not built from %s:\n%s", modulePath, out)
	}
	b.close()
	if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
		t.Errorf("%s after close: %v, want it gone", b.dir, err)
	}
}

// TestBaselineRun runs one short round of ours and the baseline's
// scenarios side by side and checks that every baseline scenario measured
// cycles and server requests, and that its ratio to ours is reported.
func TestBaselineRun(t *testing.T) {
	if *baselineRev == "" {
		t.Skip("runs the peers suite with a baseline: go test -run TestBaseline ./internal/bench -args -baseline.rev HEAD~1")
	}
	only := "mutex,baseline-mutex,mutex-contended,baseline-mutex-contended,semaphore-contended,baseline-semaphore,rwlock-readheavy,baseline-rwlock"
	cfg, err := parseFlags([]string{"-suite", "peers", "-only", only, "-rounds", "1", "-duration", "300ms",
		"-warmup", "200ms", "-fsync=false", "-json", "-v=false", "-baseline", *baselineRev})
	if err != nil {
		t.Fatal(err)
	}
	before := baselineDirs(t)
	var out bytes.Buffer
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Baseline  *baselineInfo `json:"baseline"`
		Scenarios []struct {
			ID             string   `json:"id"`
			Valid          int      `json:"valid_rounds"`
			OpsPerSec      float64  `json:"ops_per_sec"`
			ServerRequests *float64 `json:"server_requests_per_cycle"`
		}
		Ratios []struct {
			Name     string    `json:"name"`
			PerRound []float64 `json:"per_round"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	if rep.Baseline == nil || rep.Baseline.Revision != *baselineRev || len(rep.Baseline.Commit) < 40 {
		t.Errorf("report's baseline %+v, want %s and its commit", rep.Baseline, *baselineRev)
	}
	seen := 0
	for _, s := range rep.Scenarios {
		if !slices.Contains(baselineIDs, s.ID) {
			continue
		}
		seen++
		if s.Valid != 1 || s.OpsPerSec <= 0 || s.ServerRequests == nil || *s.ServerRequests < 2 {
			t.Errorf("%s: %d valid rounds, %.0f ops/s, server requests %v; want a measured round with requests counted",
				s.ID, s.Valid, s.OpsPerSec, s.ServerRequests)
		}
	}
	if seen != len(baselineIDs) {
		t.Errorf("%d baseline scenarios in the report, want %d", seen, len(baselineIDs))
	}
	ratios := 0
	for _, q := range rep.Ratios {
		if strings.HasSuffix(q.Name, "/ baseline") || strings.Contains(q.Name, "/ baseline,") {
			ratios++
			if len(q.PerRound) != 1 || q.PerRound[0] <= 0 {
				t.Errorf("ratio %s: %v, want one round", q.Name, q.PerRound)
			}
		}
	}
	if ratios != 4 {
		t.Errorf("%d ratios to the baseline, want 4", ratios)
	}
	if after := baselineDirs(t); len(after) != len(before) {
		t.Errorf("baseline directories left under .cache: %v (before: %v)", after, before)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := gitOutput(defaultPeersDir(), "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func baselineDirs(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(repoRoot(t), ".cache", "bench-baseline-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
