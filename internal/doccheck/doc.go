// Package doccheck holds a test that compiles every Go code block of
// README.md and docs/*.md against this module, so that a renamed or removed
// API breaks the build rather than the reader. It has no code of its own.
//
// How a block is compiled:
//
//   - A block that begins with a package clause is a whole file, compiled
//     as it is, in a package of its own.
//   - A block of top-level declarations (functions, types, variables, with
//     or without an import declaration) is a file of the package that
//     holds every block of the same Markdown file.
//   - Any other block is a list of statements, compiled as the body of
//     "func _() error { ... return nil }"; the variables it declares at its
//     top level are used once after it, so a snippet that only shows a call
//     does not fail for an unused result.
//
// A block that states no imports gets them from the packages it names
// (this module's packages, go-zookeeper, OpenTelemetry and the standard
// library packages in the table of the test).
//
// What a snippet takes for granted (a client c, a context ctx, a function
// write of the reader's own) is declared in an HTML comment anywhere in
// the same Markdown file, which Markdown does not show:
//
//	<!-- doccheck:
//	var c *recipe.Client
//	var write func(context.Context, int64) error
//	-->
//
// Its text is Go top-level declarations, shared by every block of the
// file. A block that cannot be compiled (pseudo-code, output) is marked by
// the comment <!-- not compiled: the reason --> on the last non-blank line
// before it.
package doccheck
