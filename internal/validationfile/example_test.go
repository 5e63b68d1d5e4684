package validationfile_test

import (
	"context"
	"fmt"

	"github.com/latch-authz/latch/internal/validationfile"
)

// A file is parsed, run, its failures listed with their lines, and its validation
// section rendered from the answers, as `latch validate --update` writes it.
func ExampleRun() {
	src := `schema: |-
  definition user {}
  definition group {
    relation member: user | group#member
  }
  definition document {
    relation viewer: user | user:* | group#member
    relation banned: user
    permission view = viewer - banned
  }
relationships: |-
  group:eng#member@user:ann
  document:readme#viewer@group:eng#member
  document:public#viewer@user:*
  document:public#banned@user:bob
assertions:
  assertTrue:
    - document:readme#view@user:ann
validation:
  document:readme#view:
    - "[user:ann] is <document:readme#viewer>"
  document:public#view: []
`
	f, err := validationfile.Parse("example.yaml", []byte(src))
	if err != nil {
		panic(err)
	}
	rep, err := validationfile.Run(context.Background(), f)
	if err != nil {
		panic(err)
	}
	for _, fail := range rep.Failures {
		fmt.Println(fail)
	}
	section, err := validationfile.RenderValidation(rep.Relations)
	if err != nil {
		panic(err)
	}
	fmt.Print(section)
	// Output:
	// example.yaml:20: document:readme#view: expected no subject group:eng#member, found [group:eng#member] is <document:readme#viewer>
	// example.yaml:21: document:readme#view: expected [user:ann] is <document:readme#viewer>, found [user:ann] is <group:eng#member>
	// example.yaml:22: document:public#view: expected no subject user:*, found [user:* - {user:bob}] is <document:public#viewer>
	// validation:
	//   document:public#view:
	//     - "[user:* - {user:bob}] is <document:public#viewer>"
	//   document:readme#view:
	//     - "[group:eng#member] is <document:readme#viewer>"
	//     - "[user:ann] is <group:eng#member>"
}
