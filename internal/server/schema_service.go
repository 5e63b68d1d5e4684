package server

import (
	"context"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schemachange"
	"github.com/latch-authz/latch/internal/store"
)

// schemaService serves authzed.api.v1.SchemaService.
type schemaService struct {
	v1.UnimplementedSchemaServiceServer
	s *Server
}

// ReadSchema prints the schema in force as SpiceDB does (schema.Format), whatever the
// layout it was written in.
func (ss *schemaService) ReadSchema(ctx context.Context, _ *v1.ReadSchemaRequest) (*v1.ReadSchemaResponse, error) {
	r, err := ss.s.readerFor(ctx, headConsistency)
	if err != nil {
		return nil, ss.s.status(err)
	}
	sch, err := ss.s.schemas.atRevision(ctx, r)
	if err != nil {
		return nil, ss.s.status(err)
	}
	if len(sch.Definitions) == 0 && len(sch.Caveats) == 0 {
		return nil, ss.s.status(&noSchemaError{})
	}
	return &v1.ReadSchemaResponse{SchemaText: schema.Format(sch), ReadAt: tokenFor(r.Revision())}, nil
}

// WriteSchema compiles the schema, then replaces the stored one inside a transaction
// that first checks no stored relationship would be left without a relation or an
// allowed subject type to stand on.
func (ss *schemaService) WriteSchema(ctx context.Context, req *v1.WriteSchemaRequest) (*v1.WriteSchemaResponse, error) {
	compiled, text, err := ss.s.compileForWrite(ctx, req.GetSchema())
	if err != nil {
		return nil, ss.s.status(err)
	}
	rev, err := ss.s.store.WriteSchema(ctx, text, func(ctx context.Context, r store.Reader) error {
		old, err := ss.s.schemas.at(ctx, r)
		if err != nil {
			return err
		}
		return schemachange.Check(ctx, r, old, compiled)
	})
	if err != nil {
		return nil, ss.s.status(err)
	}
	countDispatches(ctx, len(compiled.Definitions)+len(compiled.Caveats))
	return &v1.WriteSchemaResponse{WrittenAt: tokenFor(rev)}, nil
}

// compileForWrite compiles src and returns the text to store: src as written (blank:
// no schema), so that reflection returns its comments as written, as SpiceDB's does.
func (s *Server) compileForWrite(ctx context.Context, src string) (*ir.Schema, string, error) {
	if strings.TrimSpace(src) == "" {
		return s.schemas.empty, "", nil
	}
	compiled, err := s.schemas.get(ctx, src)
	if err != nil {
		return nil, "", err
	}
	return compiled, src, nil
}
