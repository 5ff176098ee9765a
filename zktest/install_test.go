package zktest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSystem is a file system of the given files, an environment and a
// PATH holding java or not.
func fakeSystem(env map[string]string, files []string, javaOnPath bool) system {
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	return system{
		getenv: func(k string) string { return env[k] },
		exists: func(p string) bool { return have[p] },
		glob: func(pattern string) ([]string, error) {
			var out []string
			for _, f := range files {
				if ok, _ := filepath.Match(pattern, f); ok {
					out = append(out, f)
				}
			}
			return out, nil
		},
		lookPath: func(string) (string, error) {
			if javaOnPath {
				return "/usr/bin/java", nil
			}
			return "", errors.New("not found")
		},
	}
}

func TestLocate(t *testing.T) {
	tarball := []string{"/opt/zk/lib/zookeeper-3.8.4.jar", "/opt/zk/lib/zookeeper-jute-3.8.4.jar", "/opt/zk/lib/netty-handler-4.1.jar"}
	debian := []string{debianJar, "/usr/share/java/log4j-1.2.jar"}
	for _, tc := range []struct {
		name      string
		classPath string
		env       map[string]string
		files     []string
		java      bool
		wantJava  string
		wantCP    string // joined with ' '
		wantErr   string // a part of the error; "" for none
	}{
		{name: "debian", files: debian, java: true, wantJava: "/usr/bin/java",
			wantCP: debianJar + " /usr/share/java/log4j-1.2.jar"},
		{name: "home wins over debian", env: map[string]string{EnvHome: "/opt/zk"}, files: append(tarball, debian...), java: true,
			wantJava: "/usr/bin/java", wantCP: "/opt/zk/conf /opt/zk/lib/netty-handler-4.1.jar /opt/zk/lib/zookeeper-3.8.4.jar /opt/zk/lib/zookeeper-jute-3.8.4.jar"},
		{name: "class path wins", classPath: "/a.jar:/b.jar", env: map[string]string{EnvHome: "/opt/zk"}, files: tarball, java: true,
			wantJava: "/usr/bin/java", wantCP: "/a.jar /b.jar"},
		{name: "java home", files: debian, env: map[string]string{"JAVA_HOME": "/jdk"}, java: false,
			wantJava: "/jdk/bin/java", wantCP: debianJar + " /usr/share/java/log4j-1.2.jar"},
		{name: "nothing", java: true, wantErr: debianJar + " is missing"},
		{name: "home without jars", env: map[string]string{EnvHome: "/opt/empty"}, files: debian, java: true,
			wantErr: "ZOOKEEPER_HOME=/opt/empty has no zookeeper-*.jar"},
		{name: "no java", files: debian, java: false, wantErr: "no java on PATH"},
		{name: "java home without java", files: append(debian, "/usr/bin/java"), env: map[string]string{"JAVA_HOME": "/jdk"}, java: true,
			wantErr: "JAVA_HOME=/jdk has no bin/java"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if tc.env["JAVA_HOME"] == "/jdk" && tc.wantErr == "" {
				files = append(files, "/jdk/bin/java")
			}
			in, err := fakeSystem(tc.env, files, tc.java).locate(tc.classPath)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrNotInstalled with %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "apt-get install zookeeper") {
					t.Fatalf("err = %v: no install hint", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if in.java != tc.wantJava || strings.Join(in.classPath, " ") != tc.wantCP {
				t.Fatalf("java %q class path %q, want %q %q", in.java, strings.Join(in.classPath, " "), tc.wantJava, tc.wantCP)
			}
		})
	}
}

func TestSettingsCheck(t *testing.T) {
	for _, tc := range []struct {
		opts     []Option
		ensemble bool
		want     string
	}{
		{opts: []Option{WithPort(70000)}, want: "not a TCP port"},
		{opts: []Option{WithPort(2181)}, ensemble: true, want: "an ensemble picks its own ports"},
		{opts: []Option{WithTLSClientCA(&CA{})}, want: "WithTLSClientCA without WithTLS"},
		{opts: []Option{WithPort(2181), WithForceSync(true)}},
	} {
		err := newSettings(tc.opts).check(tc.ensemble)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("check = %v, want %q", err, tc.want)
		}
	}
}
