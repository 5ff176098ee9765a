package walk

import "context"

func middle(ctx context.Context) {
	end(ctx)
	var f func(context.Context)
	f(ctx)
}

func (u *U) last(ctx context.Context) { middle(ctx) }
