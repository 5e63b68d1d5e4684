package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestReadKnowsTheToolchain(t *testing.T) {
	info := Read()
	if info.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", info.GoVersion, runtime.Version())
	}
	if info.Version == "" {
		t.Error("Version is empty; a source build reports (devel)")
	}
	if !strings.Contains(info.String(), "go: "+runtime.Version()) {
		t.Errorf("String() = %q lacks the Go version", info.String())
	}
}

func TestShort(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.2.3"}, "v1.2.3"},
		{Info{Version: "(devel)", Commit: "0123456789abcdef0123456789abcdef01234567"}, "(devel) 0123456789ab"},
		{Info{Version: "(devel)", Commit: "0123456789abcdef0123456789abcdef01234567-dirty"}, "(devel) 0123456789ab-dirty"},
		{Info{Version: "(devel)", Commit: "abc-dirty"}, "(devel) abc-dirty"},
	} {
		if got := tc.info.Short(); got != tc.want {
			t.Errorf("%+v.Short() = %q, want %q", tc.info, got, tc.want)
		}
	}
}
