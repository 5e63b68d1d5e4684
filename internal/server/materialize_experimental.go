package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	mv0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/store"
)

// roaringService implements RoaringLookupResourcesService.
type roaringService struct {
	mv0.UnimplementedRoaringLookupResourcesServiceServer
	s *Server
}

// maxRoaringID is the largest resource id a roaring lookup accepts (44 bits).
const maxRoaringID = 1<<44 - 1

// roaringIDError: a resource id the bitmap cannot hold, or a result it cannot say.
type roaringIDError struct{ msg string }

func (e *roaringIDError) Error() string { return e.msg }

// ExperimentalRoaringLookupResources answers LookupResources as a roaring64 bitmap
// (RoaringFormatSpec's portable 64-bit format, written by RoaringBitmap/roaring) of
// the resources' ids, which must be canonical decimal integers of at most 44 bits: a
// result that is not, or one that holds only under a caveat (a bitmap cannot say
// "conditionally"), fails the call rather than leave a bitmap quietly wrong.
func (r *roaringService) ExperimentalRoaringLookupResources(ctx context.Context, req *mv0.ExperimentalRoaringLookupResourcesRequest) (*mv0.ExperimentalRoaringLookupResourcesResponse, error) {
	s := r.s
	rd, sch, err := s.readerAndSchema(ctx, req.GetConsistency())
	if err != nil {
		return nil, s.status(err)
	}
	subj := relv1.FromSubject(req.GetSubject())
	if subj.Object.Type == req.GetResourceObjectType() {
		if _, err := roaringID(req.GetResourceObjectType(), subj.Object.ID); err != nil {
			return nil, s.status(err)
		}
	}
	bm := roaring64.New()
	lreq := engine.LookupResourcesRequest{ResourceType: req.GetResourceObjectType(), Permission: req.GetPermission(), Subject: subj}
	err = s.engine.LookupResources(ctx, sch, rd, lreq, func(f engine.FoundResource) error {
		if f.Result.Membership == engine.Conditional {
			return &roaringIDError{fmt.Sprintf("%s:%s has %s only under a caveat, which a bitmap cannot say: use LookupResources with the caveat's context", req.GetResourceObjectType(), f.ID, req.GetPermission())}
		}
		id, err := roaringID(req.GetResourceObjectType(), f.ID)
		if err != nil {
			return err
		}
		bm.Add(id)
		return nil
	})
	if err != nil {
		return nil, s.status(err)
	}
	b, err := bm.ToBytes()
	if err != nil {
		return nil, s.status(err)
	}
	return &mv0.ExperimentalRoaringLookupResourcesResponse{Bitmap: b, Cardinality: bm.GetCardinality(), AtRevision: tokenFor(rd.Revision())}, nil
}

// roaringID reads id as a canonical decimal integer of at most 44 bits.
func roaringID(typ, id string) (uint64, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != id || n > maxRoaringID {
		return 0, &roaringIDError{fmt.Sprintf("object id %s:%s is not a canonical decimal integer of at most 44 bits (0 to %d), which a roaring lookup needs of every id", typ, id, uint64(maxRoaringID))}
	}
	return n, nil
}

// relationshipsService implements Materialize's RelationshipsService.
type relationshipsService struct {
	mv0.UnimplementedRelationshipsServiceServer
	s *Server
}

// ExperimentalCountRelationshipsByFilter counts the relationships a filter selects
// at the newest revision, the filter checked against the schema as
// ReadRelationships checks it.
func (rs *relationshipsService) ExperimentalCountRelationshipsByFilter(ctx context.Context, req *mv0.ExperimentalCountRelationshipsByFilterRequest) (*mv0.ExperimentalCountRelationshipsByFilterResponse, error) {
	s := rs.s
	if req.GetRelationshipFilter() == nil || filterIsEmpty(req.GetRelationshipFilter()) {
		return nil, s.status(&invalidFilterError{req.GetRelationshipFilter().String(), "at least one field of the relationship filter must be set"})
	}
	r, sch, err := s.readerAndSchema(ctx, &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}})
	if err != nil {
		return nil, s.status(err)
	}
	f := filterFromV1(req.GetRelationshipFilter())
	if err := validateFilter(sch, f); err != nil {
		return nil, s.status(err)
	}
	var n uint64
	for _, err := range r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, s.status(err)
		}
		n++
	}
	return &mv0.ExperimentalCountRelationshipsByFilterResponse{RelationshipCount: n, ReadAt: tokenFor(r.Revision())}, nil
}
