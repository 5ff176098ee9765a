package zktest_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// helperEnv marks a run of this test binary as a child of the tests
// below.
const helperEnv = "ZKTEST_HELPER_CHILD"

// runChild runs the test named test in a child process of this binary
// with PATH holding no java and no ZooKeeper configured, plus env.
func runChild(t *testing.T, test string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = []string{helperEnv + "=1", "PATH=" + t.TempDir(), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestNoInstallation checks what a test sees on a machine where no
// ZooKeeper can be run (here: no java anywhere): Start skips it with the
// install message, and fails it with the same message when
// ZKTEST_REQUIRED=1.
func TestNoInstallation(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("child")
	}
	const hint = "apt-get install zookeeper"
	out, err := runChild(t, "TestChildStart")
	if err != nil || !strings.Contains(out, "--- SKIP: TestChildStart") || !strings.Contains(out, hint) ||
		!strings.Contains(out, zktest.ErrNotInstalled.Error()) {
		t.Fatalf("without ZKTEST_REQUIRED: err %v, want a skip with the install message; output:\n%s", err, out)
	}
	out, err = runChild(t, "TestChildStart", zktest.EnvRequired+"=1")
	if err == nil || !strings.Contains(out, "--- FAIL: TestChildStart") || !strings.Contains(out, hint) {
		t.Fatalf("with ZKTEST_REQUIRED=1: err %v, want a failure with the install message; output:\n%s", err, out)
	}
	out, err = runChild(t, "TestChildEnsemble", zktest.EnvRequired+"=1")
	if err == nil || !strings.Contains(out, "--- FAIL: TestChildEnsemble") || !strings.Contains(out, hint) {
		t.Fatalf("ensemble with ZKTEST_REQUIRED=1: err %v, want a failure with the install message; output:\n%s", err, out)
	}
}

func TestChildStart(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestNoInstallation")
	}
	zktest.Start(t)
	t.Error("Start returned without a ZooKeeper installation")
}

func TestChildEnsemble(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestNoInstallation")
	}
	zktest.StartEnsemble(t, 3)
	t.Error("StartEnsemble returned without a ZooKeeper installation")
}

// TestExternalServer checks ZKTEST_ADDR on a machine without java: Start
// returns the named server, whose process calls fail with ErrExternal,
// and an option that needs a server of its own ends the test.
func TestExternalServer(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("child")
	}
	srv := zktest.Shared(t)
	out, err := runChild(t, "TestChildExternal", zktest.EnvAddr+"="+srv.Addr(), zktest.EnvRequired+"=1")
	if err != nil || !strings.Contains(out, "--- PASS: TestChildExternal") {
		t.Fatalf("err %v; output:\n%s", err, out)
	}
	out, err = runChild(t, "TestChildExternalOption", zktest.EnvAddr+"="+srv.Addr())
	if err == nil || !strings.Contains(out, "WithForceSync needs a server of its own") {
		t.Fatalf("err %v, want a failure naming the option; output:\n%s", err, out)
	}
}

func TestChildExternal(t *testing.T) {
	want := os.Getenv(zktest.EnvAddr)
	if os.Getenv(helperEnv) == "" || want == "" {
		t.Skip("run by TestExternalServer")
	}
	s := zktest.Start(t)
	if s.Addr() != want || !s.External() {
		t.Fatalf("Addr %s External %v, want %s true", s.Addr(), s.External(), want)
	}
	if r, err := s.FourLetter("ruok"); err != nil || r != "imok" {
		t.Fatalf("ruok = %q, %v", r, err)
	}
	for name, f := range map[string]func() error{"Stop": s.Stop, "Kill": s.Kill, "Restart": s.Restart, "Freeze": s.Freeze} {
		if err := f(); !errors.Is(err, zktest.ErrExternal) {
			t.Errorf("%s = %v, want ErrExternal", name, err)
		}
	}
	if zktest.Shared(t).Addr() != want {
		t.Error("Shared does not use ZKTEST_ADDR")
	}
	c := zktest.Connect(t, s.Addr())
	if _, _, err := c.Children("/"); err != nil {
		t.Fatal(err)
	}
}

func TestChildExternalOption(t *testing.T) {
	if os.Getenv(helperEnv) == "" || os.Getenv(zktest.EnvAddr) == "" {
		t.Skip("run by TestExternalServer")
	}
	zktest.Start(t, zktest.WithForceSync(true))
}
