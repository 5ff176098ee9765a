package walk

import "context"

type T struct{ u *U }

type U struct{}

// Start passes ctx to b.go and back, and through a field's method.
func (t *T) Start(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	middle(wctx)
	t.u.last(ctx)
	ignored(context.Background())
}

func end(c context.Context) {}

func ignored(ctx context.Context) {}
