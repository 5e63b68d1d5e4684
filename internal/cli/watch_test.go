package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// `latch watch` prints each change as it is committed, resumes from a token, filters
// by object type, prints checkpoints and schema changes on request, and exits cleanly
// when interrupted.
func TestWatchCommand(t *testing.T) {
	addr := startServer(t, "k")
	env := map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "k"}
	run := func(args ...string) string {
		t.Helper()
		r := invocation{env: env}.run(context.Background(), args...)
		if r.code != 0 {
			t.Fatalf("latch %s: %+v", strings.Join(args, " "), r)
		}
		return strings.TrimSpace(r.out)
	}
	schemaTok := strings.TrimSpace(invocation{env: env, stdin: testSchema}.run(context.Background(), "schema", "write", "-").out)

	all := watchInBackground(t, env, "watch", "--start", schemaTok, "--schema")
	users := watchInBackground(t, env, "watch", "--start", schemaTok, "--object-types", "user,folder")
	run("relationship", "create", "document:readme#viewer@user:alice")
	touched := run("relationship", "touch", `document:readme#viewer@user:alice[min_level:{"required":3}]`)
	run("relationship", "delete", "document:readme#viewer@user:alice")
	want := "TOUCH document:readme#viewer@user:alice\n" +
		`TOUCH document:readme#viewer@user:alice[min_level:{"required":3}]` + "\n" +
		`DELETE document:readme#viewer@user:alice[min_level:{"required":3}]` + "\n"
	waitFor(t, all.out, regexp.MustCompile(regexp.QuoteMeta(want)+`$`))
	if got := all.stop(t); got != want {
		t.Fatalf("watch printed %q, want %q", got, want)
	}
	if got := users.stop(t); got != "" {
		t.Fatalf("watch of other object types printed %q", got)
	}

	// Resuming after the touch prints only the delete; checkpoints carry the head.
	resumed := watchInBackground(t, env, "watch", "--start", touched, "--checkpoints")
	waitFor(t, resumed.out, regexp.MustCompile(`(?m)^DELETE document:readme#viewer@user:alice\S*\nCHECKPOINT \S+\n`))
	resumed.stop(t)

	// --revisions ends each revision's lines with its token.
	withTokens := watchInBackground(t, env, "watch", "--start", touched, "--revisions")
	run("relationship", "delete", "document:readme#viewer@user:nobody") // changes nothing: not reported
	created := run("relationship", "create", "document:plan#viewer@user:bob")
	waitFor(t, withTokens.out, regexp.MustCompile(`(?m)^DELETE document:readme#viewer@user:alice\S*\nREVISION \S+\nTOUCH document:plan#viewer@user:bob\nREVISION `+regexp.QuoteMeta(created)+`\n`))
	withTokens.stop(t)

	bad := invocation{env: env}.run(context.Background(), "watch", "--start", "bm9wZQ==")
	if bad.code != 1 || !strings.Contains(bad.err, "watching: ") {
		t.Fatalf("watch from a bad token: %+v", bad)
	}
	both := invocation{env: env}.run(context.Background(), "watch", "--object-types", "user", "--filter", "document")
	if both.code != 1 || !strings.Contains(both.err, "cannot be combined") {
		t.Fatalf("watch with both filters: %+v", both)
	}
}

// backgroundWatch is a `latch` command running until stopped.
type backgroundWatch struct {
	out    *syncBuffer
	cancel context.CancelFunc
	done   chan result
}

func watchInBackground(t *testing.T, env map[string]string, args ...string) *backgroundWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &backgroundWatch{out: &syncBuffer{}, cancel: cancel, done: make(chan result, 1)}
	go func() {
		var errOut syncBuffer
		code := Main(ctx, args, Env{In: strings.NewReader(""), Out: w.out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
		w.done <- result{code: code, out: w.out.String(), err: errOut.String()}
	}()
	t.Cleanup(cancel)
	return w
}

// stop interrupts the command, checks it exited cleanly and returns what it printed.
func (w *backgroundWatch) stop(t *testing.T) string {
	t.Helper()
	w.cancel()
	select {
	case r := <-w.done:
		if r.code != 0 || r.err != "" {
			t.Fatalf("interrupted watch: status %d, stderr %q", r.code, r.err)
		}
		return r.out
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not exit after it was interrupted")
		return ""
	}
}
