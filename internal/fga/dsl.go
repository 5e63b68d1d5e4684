package fga

import (
	"errors"
	"fmt"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"github.com/openfga/language/pkg/go/transformer"
)

// ParseDSL parses OpenFGA's modeling language into the model WriteAuthorizationModel
// takes. Every syntax error is returned with its line and column (1-based). The model
// is not validated: Compile does that.
func ParseDSL(src string) (*openfgav1.AuthorizationModel, []Problem) {
	m, err := transformer.TransformDSLToProto(src)
	if err == nil {
		return m, nil
	}
	var multi *transformer.OpenFgaDslSyntaxMultipleError
	if !errors.As(err, &multi) {
		return nil, []Problem{{Line: 1, Col: 1, Msg: err.Error()}}
	}
	probs := make([]Problem, 0, len(multi.Errors))
	for _, e := range multi.Errors {
		probs = append(probs, syntaxProblem(e))
	}
	return nil, probs
}

// syntaxProblem reads the position out of one of the transformer's syntax errors,
// whose fields are unexported: "syntax error at line=L, column=C: msg", with L and C
// counted from 0.
func syntaxProblem(e error) Problem {
	var line, col int
	var msg string
	text := e.Error()
	if n, _ := fmt.Sscanf(text, "syntax error at line=%d, column=%d:", &line, &col); n == 2 {
		prefix := fmt.Sprintf("syntax error at line=%d, column=%d: ", line, col)
		if len(text) >= len(prefix) {
			msg = text[len(prefix):]
		}
		return Problem{Line: line + 1, Col: col + 1, Msg: "syntax error: " + msg}
	}
	return Problem{Line: 1, Col: 1, Msg: text}
}
