package cli

import "testing"

const lookupSchema = `definition user {}
definition group {
	relation member: user
}
definition document {
	relation viewer: user | user:* | group#member
	relation banned: user
	permission view = viewer - banned
	permission seen = viewer
}`

func TestLookupAndExpandCommands(t *testing.T) {
	addr := startServer(t, "k")
	env := map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "k"}
	runSteps(t, env, []step{
		{args: []string{"schema", "write", "-"}, stdin: lookupSchema, outRE: token},
		{args: []string{
			"relationship", "create", "document:a#viewer@user:ann", "document:b#viewer@group:eng#member",
			"group:eng#member@user:ann", "document:c#viewer@user:*", "document:c#banned@user:bob", "document:d#viewer@user:bob",
		}, outRE: token},
		{args: []string{"lookup-resources", "document", "view", "user:ann"}, out: "a\nb\nc\n"},
		{args: []string{"lookup-resources", "document", "view", "user:ann", "--limit", "1"}, out: "a\nb\nc\n"},
		{args: []string{"lookup-resources", "document", "view", "user:bob"}, out: "d\n"},
		{args: []string{"lookup-subjects", "document:c", "view", "user"}, out: "* (except bob)\n"},
		{args: []string{"lookup-subjects", "document:b", "view", "user"}, out: "ann\n"},
		{args: []string{"lookup-subjects", "document:b", "view", "group#member"}, out: "eng\n"},
		{args: []string{"expand", "document:c", "view"}, out: "document:c#view exclusion\n  document:c#viewer\n    user:*\n  document:c#banned\n    user:bob\n"},
		{args: []string{"lookup-resources", "document", "nope", "user:ann"}, code: 1, err: "looking up resources: "},
		{args: []string{"lookup-resources", "document", "view", "user:ann", "--limit", "1001"}, code: 1, err: "maximum allowed of 1000"},
		{args: []string{
			"relationship", "create", "document:e#viewer@user:cy", "document:e#viewer@user:ann", "document:e#viewer@user:bob",
			"document:e#viewer@user:*", "document:e#banned@user:dee",
		}, outRE: token},
		{args: []string{"lookup-subjects", "document:e", "view", "user", "--limit", "2"}, out: "ann\nbob\ncy\n* (except dee)\n"},
		{args: []string{"lookup-subjects", "document:e", "view", "user", "--limit", "1", "--consistency", "full"}, out: "ann\nbob\ncy\n* (except dee)\n"},
		{args: []string{"expand", "document:e", "seen"}, out: "document:e#seen union\n  document:e#viewer\n    user:*\n    user:ann\n    user:bob\n    user:cy\n"},
		{args: []string{"lookup-subjects", "document", "view", "user"}, code: 1, err: "resource: "},
	})
}
