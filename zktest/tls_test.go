package zktest_test

import (
	"crypto/x509"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// A certificate issued by a CA verifies for 127.0.0.1 and localhost
// against the CA's pool, and not against another CA's.
func TestCAIssue(t *testing.T) {
	ca, err := zktest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := zktest.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue()
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: ca.Pool()}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: other.Pool()}); err == nil {
		t.Error("verified against another CA")
	}
}
