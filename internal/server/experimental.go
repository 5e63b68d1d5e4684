package server

import (
	"context"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"
)

// experimentalService serves ExperimentalService's deprecated aliases, so clients
// written against older SpiceDB releases keep working. Each alias has the same wire
// layout as the call that replaced it, and is served by that call's code.
type experimentalService struct {
	v1.UnimplementedExperimentalServiceServer
	perms  *permissionsService
	schema *schemaService
}

// convertMessage copies src into dst through the wire format; the two must share
// their field numbers and types, as each alias and its replacement do.
func convertMessage[T proto.Message](src proto.Message, dst T) (T, error) {
	b, err := proto.Marshal(src)
	if err != nil {
		return dst, internalError{err}
	}
	if err := proto.Unmarshal(b, dst); err != nil {
		return dst, internalError{err}
	}
	return dst, nil
}

func (e *experimentalService) BulkImportRelationships(stream v1.ExperimentalService_BulkImportRelationshipsServer) error {
	s := e.perms.s
	n, err := s.importRelationships(stream)
	if err != nil {
		return s.status(err)
	}
	return stream.SendAndClose(&v1.BulkImportRelationshipsResponse{NumLoaded: n})
}

func (e *experimentalService) BulkExportRelationships(req *v1.BulkExportRelationshipsRequest, stream v1.ExperimentalService_BulkExportRelationshipsServer) error {
	s := e.perms.s
	ereq, err := convertMessage(req, &v1.ExportBulkRelationshipsRequest{})
	if err != nil {
		return s.status(err)
	}
	err = s.exportRelationships(stream.Context(), ereq, func(resp *v1.ExportBulkRelationshipsResponse) error {
		return stream.Send(&v1.BulkExportRelationshipsResponse{AfterResultCursor: resp.AfterResultCursor, Relationships: resp.Relationships})
	})
	if err != nil {
		return s.status(err)
	}
	return nil
}

func (e *experimentalService) BulkCheckPermission(ctx context.Context, req *v1.BulkCheckPermissionRequest) (*v1.BulkCheckPermissionResponse, error) {
	creq, err := convertMessage(req, &v1.CheckBulkPermissionsRequest{})
	if err != nil {
		return nil, e.perms.s.status(err)
	}
	resp, err := e.perms.CheckBulkPermissions(ctx, creq)
	if err != nil {
		return nil, err
	}
	out, err := convertMessage(resp, &v1.BulkCheckPermissionResponse{})
	if err != nil {
		return nil, e.perms.s.status(err)
	}
	return out, nil
}

// The Experimental* schema calls are the SchemaService calls under their old names.

func (e *experimentalService) ExperimentalReflectSchema(ctx context.Context, req *v1.ExperimentalReflectSchemaRequest) (*v1.ExperimentalReflectSchemaResponse, error) {
	return aliasCall(ctx, e, req, &v1.ReflectSchemaRequest{}, e.schema.ReflectSchema, &v1.ExperimentalReflectSchemaResponse{})
}

func (e *experimentalService) ExperimentalComputablePermissions(ctx context.Context, req *v1.ExperimentalComputablePermissionsRequest) (*v1.ExperimentalComputablePermissionsResponse, error) {
	return aliasCall(ctx, e, req, &v1.ComputablePermissionsRequest{}, e.schema.ComputablePermissions, &v1.ExperimentalComputablePermissionsResponse{})
}

func (e *experimentalService) ExperimentalDependentRelations(ctx context.Context, req *v1.ExperimentalDependentRelationsRequest) (*v1.ExperimentalDependentRelationsResponse, error) {
	return aliasCall(ctx, e, req, &v1.DependentRelationsRequest{}, e.schema.DependentRelations, &v1.ExperimentalDependentRelationsResponse{})
}

func (e *experimentalService) ExperimentalDiffSchema(ctx context.Context, req *v1.ExperimentalDiffSchemaRequest) (*v1.ExperimentalDiffSchemaResponse, error) {
	return aliasCall(ctx, e, req, &v1.DiffSchemaRequest{}, e.schema.DiffSchema, &v1.ExperimentalDiffSchemaResponse{})
}

// aliasCall converts an alias's request to the replacement's, calls it, and converts
// the answer back.
func aliasCall[Req, Resp proto.Message, OldResp proto.Message](ctx context.Context, e *experimentalService, old proto.Message, req Req,
	call func(context.Context, Req) (Resp, error), out OldResp,
) (OldResp, error) {
	var zero OldResp
	req, err := convertMessage(old, req)
	if err != nil {
		return zero, e.perms.s.status(err)
	}
	resp, err := call(ctx, req)
	if err != nil {
		return zero, err
	}
	if out, err = convertMessage(resp, out); err != nil {
		return zero, e.perms.s.status(err)
	}
	return out, nil
}
