package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// docBlock returns the first code block of the doc file that begins with
// start (its first line included).
func docBlock(t *testing.T, file, start string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("../../docs", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("%s has no block beginning %q", file, start)
	}
	j := strings.Index(s[i:], "\n```")
	if j < 0 {
		t.Fatalf("%s: the block beginning %q does not end", file, start)
	}
	return s[i : i+j+1]
}

// TestDeployRecipe runs the deploy script of docs/cli-recipes.md as it is
// written, with a push-release that succeeds or fails: a failed
// push-release (exit 1) is reported as a failed deploy, a lock held
// elsewhere as another deploy running. Before -E, both were "another
// deploy ... is still running".
func TestDeployRecipe(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	dir := t.TempDir()
	script := filepath.Join(dir, "deploy.sh")
	if err := os.WriteFile(script, []byte(docBlock(t, "cli-recipes.md", "#!/bin/sh\n# deploy.sh")), 0o755); err != nil {
		t.Fatal(err)
	}
	push := "#!/bin/sh\n[ \"$2\" = broken ] && exit 1\necho \"pushed $1 $2 token $ZKLOCK_TOKEN\"\n"
	if err := os.WriteFile(filepath.Join(dir, "push-release"), []byte(push), 0o755); err != nil {
		t.Fatal(err)
	}
	service := strings.TrimPrefix(zktest.UniquePath(t), "/zktest/")
	deploy := func(version string, env ...string) result {
		t.Helper()
		cmd, stdout, stderr := b.command()
		cmd.Path, cmd.Args, cmd.Dir = "/bin/sh", []string{"sh", script, service, version}, dir
		cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(b.path)+":"+os.Getenv("PATH"))
		cmd.Env = append(cmd.Env, env...)
		return startCmd(t)(cmd, stdout, stderr).wait(t, 60*time.Second)
	}
	r := deploy("v1")
	if r.code != 0 || !strings.Contains(r.stdout, "deployed "+service+" v1") {
		t.Errorf("deploy v1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = deploy("broken")
	if r.code != 2 || !strings.Contains(r.stderr, "deploy of "+service+" failed") {
		t.Errorf("deploy of a failing push-release: exit %d, stderr %q; want 2, failed", r.code, r.stderr)
	}
	holder := b.start(t, "run", "/deploy/"+service, "sleep", "30")
	waitChildren(t, zktest.Connect(t, srv.Addr()), "/deploy/"+service, 1)
	r = deploy("v2", "DEPLOY_WAIT=1s")
	if r.code != 1 || !strings.Contains(r.stderr, "another deploy of "+service+" is still running") {
		t.Errorf("deploy while another runs: exit %d, stderr %q; want 1, still running", r.code, r.stderr)
	}
	_ = holder.cmd.Process.Kill()
}

// TestFourLetterWordWithoutNc runs the bash line of docs/operations.md
// that sends a four-letter word without nc.
func TestFourLetterWordWithoutNc(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	srv := zktest.Shared(t)
	line := strings.TrimSpace(strings.TrimPrefix(docBlock(t, "operations.md", "```sh\nbash -c 'exec 3<>/dev/tcp"), "```sh\n"))
	host, port, _ := strings.Cut(srv.Addr(), ":")
	line = strings.Replace(line, "/dev/tcp/127.0.0.1/2181", "/dev/tcp/"+host+"/"+port, 1)
	out, err := exec.Command("sh", "-c", line).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Zookeeper version") {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}
