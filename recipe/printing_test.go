package recipe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A client with digest credentials prints no password, nor its digest
// hash, under any verb of fmt nor through slog's handlers; it names its
// user. Before Format, GoString and LogValue, %+v printed the
// configuration's authPassword field.
func TestClientPrintsNoSecret(t *testing.T) {
	const password = "S3CRET-PW-XYZ"
	srv := zktest.Shared(t)
	opts := []recipe.Option{recipe.WithDigestAuth("alice", password),
		recipe.WithACL(zk.DigestACL(zk.PermAll, "alice", password)...)}
	c := locktest.Client(t, []string{srv.Addr()}, opts...)
	hash := zk.DigestACL(zk.PermAll, "alice", password)[0].ID[len("alice:"):]

	var printed []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		printed = append(printed, fmt.Sprintf(verb, c))
	}
	printed = append(printed, fmt.Sprint(c), fmt.Sprintf("%+v", []any{c, opts}), fmt.Sprintf("%#v", opts))
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("client", "c", c)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("client", "c", c, "opts", opts)
	printed = append(printed, buf.String())
	for _, p := range printed {
		if strings.Contains(p, password) || strings.Contains(p, hash) {
			t.Errorf("printed the secret: %s", p)
		}
	}
	if s := fmt.Sprintf("%+v", c); !strings.Contains(s, "user: alice") || !strings.Contains(s, "session: 0x") {
		t.Errorf("%%+v = %s; want the session and the user", s)
	}
	if !strings.Contains(buf.String(), "c.user=alice") {
		t.Errorf("slog text: %s; want c.user=alice", buf.String())
	}
	t.Logf("%%+v: %+v", c)
}

// A digest user name with ':' is refused before any I/O: the server would
// take the part before the colon as the user, and the client would refuse
// its own directories with ErrDirectoryACL.
func TestDigestUserWithColon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := recipe.Connect(ctx, []string{"127.0.0.1:1"}, recipe.WithDigestAuth("ops:team", "pw"))
	if err == nil {
		c.Close()
		t.Fatal("Connect took the user ops:team")
	}
	if !errors.Is(err, recipe.ErrInvalidArgument) || !strings.Contains(err.Error(), "ops:team") || ctx.Err() != nil {
		t.Fatalf("Connect with user ops:team = %v; want ErrInvalidArgument naming it, at once", err)
	}
}
