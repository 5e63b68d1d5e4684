package rel

import (
	"strings"
	"testing"
	"time"
)

func TestParseRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"document:readme#viewer@user:alice", ""},
		{"  document:readme#viewer@user:alice\t", "document:readme#viewer@user:alice"},
		{"document:readme#viewer@user:alice#...", "document:readme#viewer@user:alice"},
		{"document:readme#viewer@group:eng#member", ""},
		{"document:readme#viewer@user:*", ""},
		{"org/document:a-b_c=d|e+f/g#viewer@user:x", ""},
		{"document:1#viewer@user:a[only_weekdays]", ""},
		{`document:1#viewer@user:a[ip_allow:{"cidr":"10.0.0.0/8","n":3}]`, ""},
		{`document:1#viewer@user:a[ip_allow:{"n":3, "cidr":"10.0.0.0/8"}]`, `document:1#viewer@user:a[ip_allow:{"cidr":"10.0.0.0/8","n":3}]`},
		{"document:1#viewer@user:a[expiration:2030-01-02T03:04:05Z]", ""},
		{"document:1#viewer@user:a[expiration:2030-01-02T05:04:05+02:00]", "document:1#viewer@user:a[expiration:2030-01-02T03:04:05Z]"},
		{`document:1#viewer@user:a[c_1:{"x":1}][expiration:2030-01-02T03:04:05Z]`, ""},
	} {
		r, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if got := String(r); got != want {
			t.Errorf("String(Parse(%q)) = %q, want %q", tc.in, got, want)
		}
		again, err := Parse(String(r))
		if err != nil || String(again) != String(r) {
			t.Errorf("reparsing %q: %v, %q", String(r), err, String(again))
		}
	}
}

func TestParseParts(t *testing.T) {
	r, err := Parse(`doc:1#viewer@team:x#member[cav:{"a":true}][expiration:2030-01-02T03:04:05Z]`)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if r.Resource != (ObjectRef{"doc", "1"}) || r.Relation != "viewer" || r.Subject != (SubjectRef{ObjectRef{"team", "x"}, "member"}) ||
		r.Caveat == nil || r.Caveat.Name != "cav" || r.Caveat.Context["a"] != true || r.Expiration == nil || !r.Expiration.Equal(exp) {
		t.Errorf("Parse gave %+v", r)
	}
}

func TestParseErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"document:1#viewer", "missing '@'"},
		{"document:1@user:a", "missing '#relation'"},
		{"do:1#viewer@user:a", "shorter than 3"},
		{"Document:1#viewer@user:a", "object type"},
		{"document:1#vi@user:a", `relation "vi"`},
		{"document:#viewer@user:a", "object id"},
		{"document:a b#viewer@user:a", "object id"},
		{"document:1#viewer@user:a[", "["},
		{"document:1#viewer@user:a[cav:{not json}]", "cav"},
		{"document:1#viewer@user:a[expiration:tomorrow]", "expiration"},
		{"document:1#viewer@user:a junk", "junk"},
		{"document:*#viewer@user:a", "*"},
		{"document:1#viewer@user:" + strings.Repeat("x", 1025), "1024"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error mentioning %q", tc.in, err, tc.want)
		}
	}
}

func TestParseCheck(t *testing.T) {
	res, perm, subj, ctx, err := ParseCheck(`document:1#view@user:alice#... with {"day": "tuesday"}`)
	if err != nil {
		t.Fatal(err)
	}
	if res != (ObjectRef{"document", "1"}) || perm != "view" || subj != (SubjectRef{Object: ObjectRef{"user", "alice"}}) || ctx["day"] != "tuesday" {
		t.Errorf("ParseCheck gave %v %v %v %v", res, perm, subj, ctx)
	}
	for _, bad := range []string{"document:1#view", "document:1#view@user:alice with", "document:1#view@user:alice with {} extra", "document:1#view@user:alice and"} {
		if _, _, _, _, err := ParseCheck(bad); err == nil {
			t.Errorf("ParseCheck(%q) accepted", bad)
		}
	}
}

func TestValidateNames(t *testing.T) {
	good := []string{"abc", "a_c", "a12", "org/document", "abc/def/ghi", strings.Repeat("a", 64)}
	bad := []string{"", "ab", "_ab", "ab_", "Abc", "a-c", "/abc", "abc/", "abc//def", strings.Repeat("a", 65)}
	for _, n := range good {
		if err := ValidateType(n); err != nil {
			t.Errorf("ValidateType(%q): %v", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidateType(n); err == nil {
			t.Errorf("ValidateType(%q) accepted", n)
		}
	}
	for _, id := range []string{"a", "A-b_c|e", "ab=", "x/y+z", "1"} {
		if err := ValidateObjectID(id); err != nil {
			t.Errorf("ValidateObjectID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "a b", "*", "a#b", "a:b", "a.b", "x@y"} {
		if err := ValidateObjectID(id); err == nil {
			t.Errorf("ValidateObjectID(%q) accepted", id)
		}
	}
	if err := ValidateSubjectID("*"); err != nil {
		t.Errorf("ValidateSubjectID(*): %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"document:readme#viewer@user:alice", `d:1#v@u:a[c:{"x":1}][expiration:2030-01-02T03:04:05Z]`, "a:b#c@d:e#f", "x[y]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if err := Validate(r); err != nil {
			t.Fatalf("Parse(%q) returned an invalid relationship: %v", s, err)
		}
		again, err := Parse(String(r))
		if err != nil {
			t.Fatalf("reparsing %q (from %q): %v", String(r), s, err)
		}
		if String(again) != String(r) {
			t.Fatalf("round trip changed %q to %q", String(r), String(again))
		}
	})
}
