package server

import (
	"strings"
	"testing"
)

// TestCheckCacheAnswersRepeats: a repeated check at one revision is answered from the
// cache, and a write (a new revision) is never hidden by it.
func TestCheckCacheAnswersRepeats(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	for range 3 {
		resp, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "amy", ""))
		if err != nil || resp.Permissionship.String() != "PERMISSIONSHIP_NO_PERMISSION" {
			t.Fatalf("check: %v, %v", resp, err)
		}
	}
	if body := scrape(t, ts.srv.MetricsAddr()); !strings.Contains(body, "latch_check_cache_hits_total 2") {
		t.Errorf("two repeated checks were not cache hits:\n%s", grepLines(body, "check_cache"))
	}
	ts.write(t, relationship("document", "readme", "viewer", "user", "amy", ""))
	resp, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "amy", ""))
	if err != nil || resp.Permissionship.String() != "PERMISSIONSHIP_HAS_PERMISSION" {
		t.Errorf("check after the write: %v, %v", resp, err)
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
