package server

import (
	"context"
	"fmt"
	"slices"

	mv0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// watchPermissionsService implements WatchPermissionsService.
type watchPermissionsService struct {
	mv0.UnimplementedWatchPermissionsServiceServer
	s *Server
}

// notConfiguredError: a watch of a permission the server was not configured to stream.
type notConfiguredError struct{ target materialize.Target }

func (e *notConfiguredError) Error() string {
	return fmt.Sprintf("permission %s is not configured for Materialize: start the server with --materialize %s", e.target, e.target)
}

// WatchPermissions streams, for each committed revision, the computed permissions of
// the watched configured targets that it changed, then its completed_revision: the
// resources a revision may affect are found through the permission sets, and each
// one's subjects are evaluated before and at the revision; a change is sent where
// they differ (HAS, CONDITIONAL or NO permission now).
func (w *watchPermissionsService) WatchPermissions(req *mv0.WatchPermissionsRequest, stream grpc.ServerStreamingServer[mv0.WatchPermissionsResponse]) error {
	s := w.s
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if len(req.GetPermissions()) == 0 {
		return s.status(&lookupRequestError{"at least one permission to watch is required"})
	}
	var targets []materialize.Target
	for _, p := range req.GetPermissions() {
		if p.GetOptionalSubjectRelation() != "" {
			return s.status(&lookupRequestError{fmt.Sprintf("optional_subject_relation %q: only permissions of subjects themselves are watched", p.GetOptionalSubjectRelation())})
		}
		t := materialize.Target{Resource: p.GetResourceType(), Permission: p.GetPermission(), SubjectType: p.GetSubjectType()}
		if !s.permsets.Configured(t) {
			return s.status(&notConfiguredError{t})
		}
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	watcher, after, release, err := s.startSetsWatch(ctx, "watching permissions", req.GetOptionalStartingAfter())
	if err != nil {
		return err
	}
	defer release()
	snd := startWatchSender(stream.Send)
	err = func() error {
		for a, err := range s.permsets.WatchAffected(ctx, watcher, after, watchCheckpointInterval, targets) {
			if err != nil {
				return err
			}
			tok := tokenFor(a.Revision)
			for _, t := range targets {
				for _, id := range a.Resources[t] {
					changes, err := s.permissionChanges(ctx, t, id, a.Before, a.Revision)
					if err != nil {
						return err
					}
					for _, c := range changes {
						c.Revision = tok
						if err := snd.push(ctx, &mv0.WatchPermissionsResponse{Response: &mv0.WatchPermissionsResponse_Change{Change: c}}); err != nil {
							return err
						}
					}
				}
			}
			if err := snd.push(ctx, &mv0.WatchPermissionsResponse{Response: &mv0.WatchPermissionsResponse_CompletedRevision{CompletedRevision: tok}}); err != nil {
				return err
			}
		}
		return ctx.Err()
	}()
	cancel()
	return s.status(snd.finish(err))
}

// permissionChanges evaluates the subjects of t's permission on resource id before
// and at a revision and returns the subjects whose permissionship differs.
func (s *Server) permissionChanges(ctx context.Context, t materialize.Target, id string, before, at store.Revision) ([]*mv0.PermissionChange, error) {
	was, err := s.subjectsAt(ctx, t, id, before)
	if err != nil {
		return nil, err
	}
	is, err := s.subjectsAt(ctx, t, id, at)
	if err != nil {
		return nil, err
	}
	var ids []string
	for sid := range was {
		ids = append(ids, sid)
	}
	for sid := range is {
		if _, ok := was[sid]; !ok {
			ids = append(ids, sid)
		}
	}
	slices.Sort(ids)
	var out []*mv0.PermissionChange
	for _, sid := range ids {
		m, ok := is[sid]
		if ok && was[sid] == m {
			continue
		}
		ship := mv0.PermissionChange_PERMISSIONSHIP_NO_PERMISSION
		switch {
		case ok && m == engine.HasPermission:
			ship = mv0.PermissionChange_PERMISSIONSHIP_HAS_PERMISSION
		case ok && m == engine.Conditional:
			ship = mv0.PermissionChange_PERMISSIONSHIP_CONDITIONAL_PERMISSION
		}
		out = append(out, &mv0.PermissionChange{
			Resource: &v1.ObjectReference{ObjectType: t.Resource, ObjectId: id}, Permission: t.Permission,
			Subject:        &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: t.SubjectType, ObjectId: sid}},
			Permissionship: ship,
		})
	}
	return out, nil
}

// subjectsAt returns the subjects of type t.SubjectType with t's permission on
// resource id at rev, with how they have it.
func (s *Server) subjectsAt(ctx context.Context, t materialize.Target, id string, rev store.Revision) (map[string]engine.Membership, error) {
	r, err := s.store.Reader(ctx, rev)
	if err != nil {
		return nil, err
	}
	sch, err := s.schemas.atRevision(ctx, r)
	if err != nil {
		return nil, err
	}
	out := map[string]engine.Membership{}
	req := engine.LookupSubjectsRequest{Resource: rel.ObjectRef{Type: t.Resource, ID: id}, Permission: t.Permission, SubjectType: t.SubjectType}
	err = s.engine.LookupSubjects(ctx, sch, r, req, func(f engine.FoundSubject) error {
		out[f.ID] = f.Result.Membership
		return nil
	})
	return out, err
}
