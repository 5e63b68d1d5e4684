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

// ParseModules parses a modular model: an fga.mod manifest (`schema: '1.2'`,
// `contents:` listing the module files) and the contents of those files by name,
// combined by OpenFGA's transformer into one model. Problems name their File; a
// problem in the manifest has File "fga.mod".
func ParseModules(fgaMod string, files map[string]string) (*openfgav1.AuthorizationModel, []Problem) {
	mod, err := transformer.TransformModFile(fgaMod)
	if err != nil {
		return nil, modProblems(err)
	}
	var probs []Problem
	modules := make([]transformer.ModuleFile, 0, len(mod.Contents.Value))
	for _, f := range mod.Contents.Value {
		src, ok := files[f.Value]
		if !ok {
			probs = append(probs, Problem{File: "fga.mod", Line: f.Line + 1, Col: f.Column + 1, Msg: "module file " + f.Value + " is not among the files given"})
			continue
		}
		if _, _, err := transformer.TransformModularDSLToProto(src); err != nil {
			var multi *transformer.OpenFgaDslSyntaxMultipleError
			if !errors.As(err, &multi) {
				probs = append(probs, Problem{File: f.Value, Line: 1, Col: 1, Msg: err.Error()})
				continue
			}
			for _, e := range multi.Errors {
				p := syntaxProblem(e)
				p.File = f.Value
				probs = append(probs, p)
			}
			continue
		}
		modules = append(modules, transformer.ModuleFile{Name: f.Value, Contents: src})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	m, err := transformer.TransformModuleFilesToModel(modules, mod.Schema.Value)
	if err != nil {
		return nil, moduleProblems(err)
	}
	return m, nil
}

// modProblems converts the manifest's errors (positions counted from 0).
func modProblems(err error) []Problem {
	var multi *transformer.ModFileValidationMultipleError
	if !errors.As(err, &multi) {
		return []Problem{{File: "fga.mod", Line: 1, Col: 1, Msg: err.Error()}}
	}
	out := make([]Problem, 0, len(multi.Errors))
	for _, e := range multi.Errors {
		var v *transformer.ModFileValidationError
		if errors.As(e, &v) {
			out = append(out, Problem{File: "fga.mod", Line: v.Line + 1, Col: v.Column + 1, Msg: v.Msg})
		} else {
			out = append(out, Problem{File: "fga.mod", Line: 1, Col: 1, Msg: e.Error()})
		}
	}
	return out
}

// moduleProblems converts the errors of combining modules (positions counted from 0).
func moduleProblems(err error) []Problem {
	var multi *transformer.ModuleValidationMultipleError
	if !errors.As(err, &multi) {
		return []Problem{{Line: 1, Col: 1, Msg: err.Error()}}
	}
	out := make([]Problem, 0, len(multi.Errors))
	for _, e := range multi.Errors {
		var v *transformer.ModuleTransformationSingleError
		if errors.As(e, &v) {
			out = append(out, Problem{File: v.File, Line: v.Line.Start + 1, Col: v.Column.Start + 1, Msg: v.Msg})
		} else {
			out = append(out, Problem{Line: 1, Col: 1, Msg: e.Error()})
		}
	}
	return out
}
