package playground

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// browserBudget bounds the whole browser test, Chromium's start included.
const browserBudget = 150 * time.Second

// TestPlaygroundInChromium drives the page in headless Chromium as a person would:
// a schema error shown under its line and fixed, relationships with a bad line,
// checks answered with their trees, assertions run, the YAML downloaded and loaded
// back unchanged, a share link, the keyboard, highlighting and the editing keys, the
// work kept across a reload, every example, the graph and grid views, a short window,
// a phone screen and dark mode. Each step leaves a screenshot in
// $LATCH_TEST_OUTPUT/playground (or the test's temp folder).
func TestPlaygroundInChromium(t *testing.T) {
	b := startBrowser(t)
	b.step("loaded", func() {
		b.waitFor(`document.body.dataset.ready === "true"`)
		b.waitFor(`document.querySelectorAll("#check-results details.check").length === 4`)
	})
	b.step("highlighted", func() {
		for editor, want := range map[string]string{
			"schema":        "keyword:definition name:user br:{ br:} keyword:definition name:group br:{ keyword:relation relation:member op:: ident:user",
			"relationships": "type:document op:: id:readme op:# relation:owner op:@ type:user op:: id:ada",
			"checks":        "type:document op:: id:readme op:# relation:view op:@ type:user op:: id:alice",
			"assertions":    "key:assertTrue op:: op:- type:document",
		} {
			got := eval[string](b, fmt.Sprintf(`Array.from(document.querySelectorAll('[data-editor=%s] [class^=tok-]'), (e) => e.className.slice(4) + ":" + e.textContent).join(" ")`, editor))
			if !strings.HasPrefix(got, want) {
				t.Errorf("%s highlighted as %.200s; want it to start %s", editor, got, want)
			}
		}
	})
	b.step("editing-keys", func() {
		eval[string](b, `editors.schema.text = "definition a {}"`)
		// A click makes Tab indent (a keyboard user who tabbed in tabs out instead).
		b.do(chromedp.Click(chromedp.CSS(`[data-editor=schema] pre`)))
		eval[bool](b, `editors.schema.setCaret(14), true`)
		b.waitFor(`document.querySelectorAll('[data-editor=schema] .tok-br.match').length === 2`)
		b.do(chromedp.KeyEvent(kb.Enter), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent("x"))
		if got := eval[string](b, `editors.schema.text`); got != "definition a {\n    x}" {
			t.Errorf("Enter, Tab and x after `{` made %q; want the new line indented, then indented once more", got)
		}
		b.do(chromedp.KeyEvent("z", chromedp.KeyModifiers(kb.ModifierCtrl)))
		if got := eval[string](b, `editors.schema.text`); got != "definition a {\n    }" {
			t.Errorf("Ctrl+Z made %q, want the x undone", got)
		}
	})
	b.step("schema-error", func() {
		b.typeInto("schema", "definition user {}\n\ndefinition document {\n  relation viewer: user\n  permission view = viewer + editor\n}")
		b.waitFor(`document.querySelector('[data-editor=schema] .widget.error[data-line="5"]') !== null`)
		// The note sits right after line 5's text and names the problem.
		before := eval[string](b, `(() => { const w = document.querySelector('[data-editor=schema] .widget.error'); const r = document.createRange(); r.setStart(w.parentNode, 0); r.setEndBefore(w); return r.toString(); })()`)
		msg := eval[string](b, `document.querySelector('[data-editor=schema] .widget.error').textContent`)
		if !strings.HasSuffix(before, "permission view = viewer + editor\n") || !strings.Contains(msg, "editor") || !strings.HasPrefix(msg, "error 5:") {
			t.Fatalf("schema note %q after %q: want the line-5 diagnostic about `editor` right after line 5", msg, before)
		}
		bad := eval[string](b, `Array.from(document.querySelectorAll('[data-editor=schema] .gutter .bad'), (d) => d.textContent).join(",")`)
		if bad != "5" {
			t.Errorf("gutter marks lines %q, want 5", bad)
		}
	})
	b.step("schema-fixed", func() {
		b.typeInto("schema", "definition user {}\n\ndefinition document {\n  relation viewer: user\n  relation editor: user\n  permission view = viewer + editor\n}")
		b.waitFor(`document.querySelector('[data-editor=schema] .widget') === null && document.querySelector('#check-results .badge.error') !== null`)
	})
	b.step("relationship-error", func() {
		b.typeInto("relationships", "document:readme#viewer@user:alice\ndocument:readme#owner@user:carol\ndocument:readme#editor@user:bob")
		b.waitFor(`document.querySelector('[data-editor=relationships] .widget.error[data-line="2"]') !== null`)
		msg := eval[string](b, `document.querySelector('[data-editor=relationships] .widget.error').textContent`)
		if !strings.Contains(msg, "owner") {
			t.Errorf("relationship note %q does not name the unknown relation owner", msg)
		}
	})
	b.step("checks", func() {
		b.typeInto("relationships", "document:readme#viewer@user:alice\ndocument:readme#editor@user:bob")
		b.waitFor(`document.querySelector('[data-editor=relationships] .widget') === null`)
		b.typeInto("checks", "document:readme#view@user:bob\ndocument:readme#view@user:mallory")
		b.do(chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(kb.ModifierCtrl)))
		b.waitFor(`Array.from(document.querySelectorAll('#check-results details.check > summary > .badge'), (e) => e.textContent).join() === "has permission,no permission"`)
		if got := eval[string](b, `editors.checks.text`); got != "document:readme#view@user:bob\ndocument:readme#view@user:mallory" {
			t.Errorf("Ctrl+Enter changed the checks to %q", got)
		}
	})
	b.step("check-tree", func() {
		const visibleSteps = `Array.from(document.querySelectorAll('#check-results .step'), (e) => e.checkVisibility() ? e.textContent : "").join(" ").trim()`
		if folded := eval[string](b, visibleSteps); folded != "" {
			t.Fatalf("trees show %q before they are expanded", folded)
		}
		b.do(chromedp.Click(chromedp.CSS(`#check-results details.check summary`)))
		steps := eval[string](b, visibleSteps)
		for _, want := range []string{"document:readme#viewer", "document:readme#editor"} {
			if !strings.Contains(steps, want) {
				t.Errorf("expanded tree shows steps %q, want %s among them", steps, want)
			}
		}
	})
	b.step("assertions", func() {
		b.typeInto("assertions", "assertTrue:\n  - document:readme#view@user:bob\n  - document:readme#view@user:mallory\nassertFalse:\n  - document:readme#view@user:mallory")
		b.do(chromedp.Click(chromedp.CSS(`#tab-validation`)))
		b.typeInto("validation", "document:readme#view:\n  - \"[user:alice] is <document:readme#viewer>\"")
		b.do(chromedp.Click(chromedp.CSS(`#tab-assertions`)))
		b.do(chromedp.Click(chromedp.CSS(`#run-validation`)))
		b.waitFor(`document.querySelector('#validation-summary') !== null`)
		summary := eval[string](b, `document.querySelector('#validation-summary').textContent`)
		failures := eval[[]string](b, `Array.from(document.querySelectorAll('#validation-results li.failure'), (e) => e.textContent)`)
		if summary != "2 failures (4 checked)" || len(failures) != 2 || !strings.HasPrefix(failures[0], "Assertions line 3 ") || !strings.Contains(failures[0], "mallory") ||
			!strings.HasPrefix(failures[1], "Expected relations line 1 ") || !strings.Contains(failures[1], "user:bob") {
			t.Errorf("validation shows %q, %q: want a failure at assertions line 3, and bob missing from the expected relations", summary, failures)
		}
		b.waitFor(`document.querySelector('[data-editor=assertions] .widget.error[data-line="3"]') !== null`)
	})
	b.step("expected-relations-updated", func() {
		b.do(chromedp.Click(chromedp.CSS(`#regenerate`)))
		want := "document:readme#view:\n  - \"[user:alice] is <document:readme#viewer>\"\n  - \"[user:bob] is <document:readme#editor>\""
		if got := eval[string](b, `editors.validation.text`); got != want {
			t.Errorf("expected relations updated to\n%s\nwant\n%s", got, want)
		}
		b.do(chromedp.Click(chromedp.CSS(`#run-validation`)))
		b.waitFor(`document.querySelector('#validation-summary').textContent === "1 failure (4 checked)"`)
	})
	// A validation file has no place for the checks: loading one keeps the page's.
	want := eval[string](b, `JSON.stringify({...state(), checks: undefined})`)
	file := b.download()
	b.step("reloaded", func() {
		// The work survives a reload.
		b.do(chromedp.Reload())
		b.waitFor(`document.body.dataset.ready === "true"`)
		if got := eval[string](b, `JSON.stringify({...state(), checks: undefined})`); got != want {
			t.Errorf("after a reload the page holds\n%s\nwant\n%s", got, want)
		}
	})
	b.step("loaded-back", func() {
		// Another example and a failed assertion, then the file: it replaces both.
		b.pickExample("social")
		b.typeInto("assertions", "assertTrue:\n  - post:hello#view@user:carol")
		b.do(chromedp.Click(chromedp.CSS(`#run-validation`)))
		b.waitFor(`document.querySelector('#validation-summary') !== null && document.querySelector('[data-editor=assertions] .widget.error') !== null`)
		b.shot("failure-before-loading")
		b.do(chromedp.SetUploadFiles(chromedp.CSS(`#upload`), []string{file}))
		b.waitFor(`document.querySelector('#status').textContent === "loaded the validation file"`)
		after := eval[string](b, `JSON.stringify({...state(), checks: undefined})`)
		if after != want {
			t.Errorf("loaded back:\n%s\nwant:\n%s", after, want)
		}
		if old := eval[int](b, `document.querySelectorAll('#validation-results *, [data-editor=assertions] .widget').length`); old != 0 {
			t.Errorf("%d elements of the last validation run are still shown after loading a file", old)
		}
	})
	b.step("pasted", func() {
		// The same file pasted instead of uploaded, over the example again.
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		b.do(chromedp.Navigate(b.url))
		b.waitFor(`document.body.dataset.ready === "true"`)
		b.pickExample("documents")
		b.do(chromedp.Click(chromedp.CSS(`#paste`)), chromedp.SetValue(chromedp.CSS(`#paste-text`), string(text)))
		b.shot("paste-dialog")
		b.do(chromedp.Click(chromedp.CSS(`#paste-load`)))
		b.waitFor(`document.querySelector('#status').textContent === "loaded the validation file"`)
		if after := eval[string](b, `JSON.stringify({...state(), checks: undefined})`); after != want {
			t.Errorf("pasted:\n%s\nwant:\n%s", after, want)
		}
	})
	b.step("share-link", func() {
		link := eval[string](b, `share().then(() => document.querySelector('#share-url').value)`, chromedp.EvalAwaitPromise)
		b.do(chromedp.KeyEvent(kb.Escape))
		state := eval[string](b, `JSON.stringify(state())`)
		// A query makes it a new document, not a jump within this one.
		b.do(chromedp.Navigate(strings.Replace(link, "/playground/#", "/playground/?opened=link#", 1)))
		b.waitFor(`document.body.dataset.ready === "true"`)
		shared := eval[string](b, `JSON.stringify(state())`)
		if shared != state || !strings.Contains(link, "#p=") {
			t.Errorf("link %s opened as\n%s\nwant\n%s", link, shared, state)
		}
	})
	b.keyboard()
	b.examples()
	b.views()
	b.step("caveat-tree", func() {
		b.pickExample("documents")
		// The example's last check passes its caveat the address it needs.
		b.do(chromedp.Click(chromedp.CSS(`#check-results > ul > li:nth-child(4) details.check > summary`)))
		line := eval[string](b, `Array.from(document.querySelectorAll('#check-results .caveat'), (e) => e.checkVisibility() ? e.textContent : "").join("")`)
		if !strings.Contains(line, "caveat on_network on document:plan") || !strings.Contains(line, `"ip":"10.1.2.3"`) || !strings.Contains(line, "→ true") {
			t.Errorf("caveat step shows %q, want on_network evaluated true with the check's ip", line)
		}
	})
	b.step("dark", func() {
		if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		}); err != nil {
			t.Fatal(err)
		}
		bg := eval[string](b, `getComputedStyle(document.body).backgroundColor`)
		if bg != "rgb(15, 18, 22)" {
			t.Errorf("dark mode background %s, want the dark palette", bg)
		}
	})
	b.step("short-window", func() {
		// 800 px high: the checks and validation panes keep a readable height.
		b.do(chromedp.EmulateViewport(1366, 800))
		b.do(chromedp.Click(chromedp.CSS(`#run-validation`)))
		b.waitFor(`document.querySelector('#validation-summary') !== null`)
		for _, pane := range []string{"#checks-panel", "#validation-panel", "#check-results"} {
			if h := eval[float64](b, fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().height`, pane)); h < 150 {
				t.Errorf("%s is %.0f px high in an 800-px window", pane, h)
			}
		}
		b.do(chromedp.ScrollIntoView(chromedp.CSS(`#validation-results`)))
		b.shot("short-window-validation")
	})
	b.step("schema-error-scrolls", func() {
		// An error far below the visible lines is brought into view.
		eval[bool](b, `editors.schema.text = "definition user {}\n" + "// filler\n".repeat(80) + "definition doc {\n  permission view = nobody\n}", scheduleChecks(), true`)
		b.waitFor(`document.querySelector('[data-editor=schema] .widget.error') !== null`)
		b.waitFor(`(() => { const e = document.querySelector('[data-editor=schema]').getBoundingClientRect(); const w = document.querySelector('[data-editor=schema] .widget.error').getBoundingClientRect(); return w.top >= e.top && w.bottom <= e.bottom; })()`)
	})
	b.step("phone", func() {
		b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
		b.waitFor(`document.querySelector('.grid').getBoundingClientRect().width <= 390`)
		overflow := eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`)
		if overflow > 0 {
			t.Errorf("the page is %d px wider than a 390-px phone screen", overflow)
		}
	})
	b.step("phone-checks", func() {
		b.do(chromedp.ScrollIntoView(chromedp.CSS(`#checks-panel`)))
	})
}

// pickExample loads an example with the picker and waits for its checks.
func (b *browserSession) pickExample(key string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => { const s = document.querySelector('#example'); s.value = %q; s.dispatchEvent(new Event("change")); return true; })()`, key))
	b.waitFor(fmt.Sprintf(`document.querySelector('#status').textContent === "loaded the example “" + EXAMPLES[%q].title + "”"`, key))
}

// examples loads every example: its schema and relationships have no problem, its
// checks answer and its assertions pass.
func (b *browserSession) examples() {
	for _, key := range eval[[]string](b, `Object.keys(EXAMPLES)`) {
		b.step("example-"+key, func() {
			b.pickExample(key)
			if n := eval[int](b, `document.querySelectorAll('[data-editor=schema] .widget.error, [data-editor=relationships] .widget, #check-results .badge.error').length`); n != 0 {
				b.t.Errorf("example %s: %d problems shown: %s", key, n, eval[string](b, `document.querySelector('#status').textContent`))
			}
			lines := eval[int](b, `editors.checks.text.split("\n").filter((l) => l.trim()).length`)
			if got := eval[int](b, `document.querySelectorAll('#check-results details.check').length`); got != lines || lines == 0 {
				b.t.Errorf("example %s: %d checks answered, want %d", key, got, lines)
			}
			b.do(chromedp.Click(chromedp.CSS(`#run-validation`)))
			b.waitFor(`document.querySelector('#validation-summary') !== null`)
			if got := eval[string](b, `document.querySelector('#validation-results').textContent`); !strings.HasPrefix(got, "all ") {
				b.t.Errorf("example %s: validation says %q", key, got)
			}
		})
	}
}

// views draws the schema and a check's path as graphs, and edits the relationships
// in the grid.
func (b *browserSession) views() {
	b.step("graph", func() {
		b.pickExample("folders")
		b.do(chromedp.Click(chromedp.CSS(`#view-graph`)))
		b.waitFor(`document.querySelectorAll('#schema-graph svg.schema-graph g.def').length === 4`)
		members := eval[string](b, `Array.from(document.querySelectorAll('#schema-graph [data-member]'), (e) => e.dataset.member).join(" ")`)
		if !strings.Contains(members, "folder#parent") || !strings.Contains(members, "document#view") {
			b.t.Errorf("the schema graph shows %q", members)
		}
		if n := eval[int](b, `document.querySelectorAll('#schema-graph .edge').length`); n < 8 {
			b.t.Errorf("the schema graph draws %d arrows, want one per allowed type and relation read", n)
		}
	})
	b.step("graph-path", func() {
		b.do(chromedp.Click(chromedp.CSS(`#check-results details.check .path-button`)))
		b.waitFor(`document.querySelector('#schema-graph svg.path-graph') !== null`)
		steps := eval[string](b, `Array.from(document.querySelectorAll('#schema-graph .step-node'), (e) => e.dataset.step + ":" + e.classList[1]).join(" ")`)
		if !strings.Contains(steps, "group#member:has") || !strings.Contains(steps, "document#view:has") {
			b.t.Errorf("the path of document:q3#view@user:alice shows steps %q", steps)
		}
		if n := eval[int](b, `document.querySelectorAll('#schema-graph .row.on').length`); n == 0 {
			b.t.Error("the schema graph emphasises none of the path's relations")
		}
	})
	b.step("grid", func() {
		b.do(chromedp.Click(chromedp.CSS(`#view-grid`)))
		b.waitFor(`document.querySelectorAll('#relationships-grid tbody tr').length === 6`)
		b.do(chromedp.SetValue(chromedp.CSS(`#relationships-grid tbody tr:last-child td:nth-child(3) input`), "user:eve"))
		eval[bool](b, `document.querySelector('#relationships-grid tbody tr:last-child td:nth-child(3) input').dispatchEvent(new Event("change")), true`)
		if got := eval[string](b, `editors.relationships.text.split("\n").pop()`); got != "document:q3#viewer@user:eve" {
			b.t.Errorf("the grid's edit made the last line %q", got)
		}
		b.waitFor(`Array.from(document.querySelectorAll('#check-results details.check > summary > .badge'), (e) => e.textContent).join() === "has permission,no permission,has permission"`)
	})
	b.do(chromedp.Click(chromedp.CSS(`#view-schema-text`)), chromedp.Click(chromedp.CSS(`#view-relationships-text`)))
}

// keyboard checks that Tab reaches every control and editor in reading order.
func (b *browserSession) keyboard() {
	b.do(chromedp.Navigate(b.url))
	b.waitFor(`document.body.dataset.ready === "true"`)
	var order []string
	for range 30 {
		b.do(chromedp.KeyEvent(kb.Tab))
		name := eval[string](b, `(() => { const e = document.activeElement; return e.id || (e.closest("[data-editor]") || {dataset: {}}).dataset.editor || e.tagName })()`)
		order = append(order, name)
	}
	got := strings.Join(order, " ")
	want := "language example run-checks run-validation download upload paste share view-schema-text view-graph schema view-relationships-text view-grid relationships checks"
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "tab-assertions assertions") {
		b.t.Errorf("Tab visits %s; want %s ... tab-assertions assertions", got, want)
	}
	b.shot("keyboard")
}

type browserSession struct {
	t      *testing.T
	ctx    context.Context
	url    string
	out    string
	shots  int
	downTo string
}

// startBrowser serves a playground and starts headless Chromium on it, with a fresh
// profile, no network but the test server's, and a 1366×768 window.
func startBrowser(t *testing.T) *browserSession {
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("Chromium is not installed; scripts/ensure-chromium.sh (run by make test) installs it")
		}
		t.Skip("Chromium is not installed and this is not CI; run scripts/ensure-chromium.sh (make test does) to run the browser test")
	}
	h := New(Config{})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	out := os.Getenv("LATCH_TEST_OUTPUT")
	if out == "" {
		out = t.TempDir()
	}
	out = filepath.Join(out, "playground")
	// Screenshots of an earlier run would read as this run's.
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", out)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1366, 768),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	watchdog := time.AfterFunc(browserBudget, cancel)
	t.Cleanup(func() {
		watchdog.Stop()
		cancel()
		cancelAlloc()
	})
	b := &browserSession{t: t, ctx: ctx, url: srv.URL + "/playground/", out: out, downTo: t.TempDir()}
	// The first action starts the browser, which lives as long as that action's
	// context: it runs on the test's, not on one bounded like every later action.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1366, 768)); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	b.do(chromedp.Navigate(b.url))
	return b
}

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// step runs fn and screenshots the page after it.
func (b *browserSession) step(name string, fn func()) {
	b.t.Helper()
	defer func() {
		if b.t.Failed() {
			b.shot(name + "-failed")
		}
	}()
	fn()
	b.shot(name)
}

func (b *browserSession) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.shots++
	if err := os.WriteFile(filepath.Join(b.out, fmt.Sprintf("%02d-%s.png", b.shots, name)), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// actionTimeout bounds one action, so that a missing element fails its step rather
// than the whole test's budget.
const actionTimeout = 15 * time.Second

func (b *browserSession) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browserSession, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is true.
func (b *browserSession) waitFor(expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// typeInto empties an editor and types text into it key by key, as a person would
// with the editor's indentation: a new line starts indented as the one before it (one
// step more after an opening bracket), so only the rest of each line's indentation is
// typed, or Shift+Tab takes off what is too much.
func (b *browserSession) typeInto(editor, text string) {
	b.t.Helper()
	sel := fmt.Sprintf(`[data-editor=%s] pre`, editor)
	eval[string](b, fmt.Sprintf(`editors[%q].text = ""`, editor))
	b.do(chromedp.Focus(chromedp.CSS(sel)))
	auto := ""
	for i, line := range strings.Split(text, "\n") {
		if i > 0 {
			b.do(chromedp.SendKeys(chromedp.CSS(sel), "\n"))
		}
		body := strings.TrimLeft(line, " ")
		indent := line[:len(line)-len(body)]
		if strings.HasPrefix(indent, auto) {
			b.do(chromedp.SendKeys(chromedp.CSS(sel), line[len(auto):]))
		} else {
			for range (len(auto) - len(indent) + 1) / 2 {
				b.do(chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(kb.ModifierShift)))
			}
			b.do(chromedp.SendKeys(chromedp.CSS(sel), body))
		}
		auto = indent
		if strings.HasSuffix(strings.TrimRight(line, " "), "{") || strings.HasSuffix(strings.TrimRight(line, " "), "(") || strings.HasSuffix(strings.TrimRight(line, " "), "[") {
			auto += "  "
		}
	}
	got := eval[string](b, fmt.Sprintf(`editors[%q].text`, editor))
	if got != text {
		b.t.Fatalf("typed into %s:\n%q\nthe editor holds\n%q", editor, text, got)
	}
}

// download clicks Download YAML and returns the file Chromium saved.
func (b *browserSession) download() string {
	b.t.Helper()
	if _, err := chromedp.CallBrowser(b.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: b.downTo,
	}); err != nil {
		b.t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS(`#download`)))
	path := filepath.Join(b.downTo, fileName)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
			if !strings.Contains(string(data), "relation editor: user") || !strings.Contains(string(data), "assertFalse:") {
				b.t.Fatalf("downloaded file lacks the page's schema or assertions:\n%s", data)
			}
			b.shot("downloaded")
			return path
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("no %s downloaded to %s", fileName, b.downTo)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
