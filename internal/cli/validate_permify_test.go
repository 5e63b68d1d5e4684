package cli

import "testing"

func TestValidatePermifyFile(t *testing.T) {
	r := latch(t, "validate", "testdata/permify.yaml", "testdata/good.yaml")
	want := `testdata/permify.yaml:26: scenario "owners and public documents": check document:readme#view@user:bob: expected true, found false (CHECK_RESULT_DENIED)
testdata/permify.yaml: 1 failure (3 assertions checked)
testdata/good.yaml: 3 assertions held
`
	if r.code != 1 || r.out != want {
		t.Errorf("code %d, stdout:\n%s\nwant status 1 and:\n%s", r.code, r.out, want)
	}
}
