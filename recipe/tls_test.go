package recipe_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A server with a certificate made here, on its secureClientPort: a client
// that trusts the certificate's CA runs a lock cycle over TLS; a client that
// trusts another CA, and a plain client on the TLS port, fail to connect,
// the first with the handshake error in Connect's error.
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("real ZooKeeper tests skipped under -short")
	}
	if err := zktest.Installed(); err != nil {
		t.Fatal(err)
	}
	ca, err := zktest.NewCA("zkrecipes test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := zktest.StartServer(zktest.Options{TLS: &cert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	c := locktest.Client(t, []string{srv.SecureAddr()}, recipe.WithTLS(&tls.Config{RootCAs: ca.Pool()}))
	m, err := mutex.New(c, zktest.UniquePath(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock over TLS: %v", err)
	}
	if m.Token() <= 0 {
		t.Errorf("Token = %d over TLS", m.Token())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock over TLS: %v", err)
	}

	t.Run("wrong CA", func(t *testing.T) {
		other, err := zktest.NewCA("another CA")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := recipe.Connect(ctx, []string{srv.SecureAddr()}, recipe.WithTLS(&tls.Config{RootCAs: other.Pool()}))
		if err == nil {
			c.Close()
			t.Fatal("Connect trusting another CA succeeded")
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "TLS handshake with "+srv.SecureAddr()) {
			t.Fatalf("Connect trusting another CA = %v; want the TLS handshake's unknown authority", err)
		}
		// A certificate no retry can mend fails Connect at once, not
		// when its context ends.
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Fatalf("Connect trusting another CA waited for its deadline: %v", err)
		}
		t.Logf("wrong CA: %v", err)
	})
	t.Run("plain client on the TLS port", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := recipe.Connect(ctx, []string{srv.SecureAddr()})
		if err == nil {
			c.Close()
			t.Fatal("plain Connect to the TLS port succeeded")
		}
		if !strings.Contains(err.Error(), "TLS port") {
			t.Fatalf("plain Connect to the TLS port = %v; want a hint at TLS", err)
		}
		t.Logf("plain client on the TLS port: %v", err)
	})
}

// With client certificates required (ssl.clientAuth=need), a client with a
// certificate from the trusted CA runs a lock cycle; one without a
// certificate cannot connect.
func TestTLSClientCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("real ZooKeeper tests skipped under -short")
	}
	if err := zktest.Installed(); err != nil {
		t.Fatal(err)
	}
	ca, err := zktest.NewCA("zkrecipes test CA")
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := ca.Issue()
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := ca.Issue()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := zktest.StartServer(zktest.Options{TLS: &serverCert, TLSClientCA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	c := locktest.Client(t, []string{srv.SecureAddr()},
		recipe.WithTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}))
	m, err := mutex.New(c, zktest.UniquePath(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock with a client certificate: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := recipe.Connect(short, []string{srv.SecureAddr()}, recipe.WithTLS(&tls.Config{RootCAs: ca.Pool()})); err == nil {
		c.Close()
		t.Fatal("Connect without a client certificate succeeded")
	} else {
		t.Logf("without a client certificate: %v", err)
	}
}
