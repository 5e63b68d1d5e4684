package server

import (
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// rawMessage is a request the codec leaves undecoded, for a handler that decodes it
// itself: the imports. Its buffer is reused from one message to the next.
type rawMessage struct{ b []byte }

// recvImport receives one import message (ImportBulkRelationshipsRequest, or the
// experimental BulkImportRelationshipsRequest: the two are alike on the wire) into
// raw and returns its relationships, checked as any request's are: its proto rules,
// then relationshipFromWire. On a relationship that fails, it returns the ones before
// it with the error, so that they are loaded (and checked against the schema) in
// order before the error ends the import.
func (s *Server) recvImport(stream grpc.ServerStream, raw *rawMessage) ([]rel.Relationship, error) {
	if err := stream.RecvMsg(raw); err != nil {
		return nil, err
	}
	// The fast decoder takes only relationships rel.Validate accepts: what
	// relationshipFromWire checks, and stricter than the proto rules (knownValid).
	if rels, ok := relv1.FromImportRequest(raw.b); ok {
		return rels, nil
	}
	return s.decodeImportGenerated(raw.b)
}

// decodeImportGenerated decodes any import message with the generated code, returning
// the relationships before the first that fails its checks with the error.
func (s *Server) decodeImportGenerated(b []byte) ([]rel.Relationship, error) {
	req := new(v1.ImportBulkRelationshipsRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, undecodableStatus(err)
	}
	if err := validateMessage(req); err != nil {
		return nil, err
	}
	rels := make([]rel.Relationship, 0, len(req.Relationships))
	for _, w := range req.Relationships {
		r, err := s.relationshipFromWire(w)
		if err != nil {
			return rels, err
		}
		rels = append(rels, r)
	}
	return rels, nil
}
