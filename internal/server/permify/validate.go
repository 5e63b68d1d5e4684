package permify

import (
	"fmt"
	"math"

	"github.com/latch-authz/latch/internal/rel"
)

// Request checks every endpoint applies before it reads anything, as strict as
// data/write's: an id breaks the rules no stored id can break (length, characters,
// UTF-8), a page size or depth is out of range. Each refusal is ERROR_CODE_VALIDATION
// and names the field, so a hostile id is refused rather than answered DENIED.

// minDepth is the least metadata.depth Permify accepts; 0 (absent) means the default.
const minDepth = 3

func (m metadata) check() error {
	if m.Depth != 0 && (m.Depth < minDepth || m.Depth > math.MaxInt32) {
		return invalid("ERROR_CODE_VALIDATION", fmt.Sprintf("metadata.depth %d is out of range: send at least %d (or leave it out for the default)", m.Depth, minDepth))
	}
	return nil
}

// checkPageSize refuses a page_size Permify's uint32 field cannot hold; 0 (absent)
// means the endpoint's default, as Permify ignores an empty page_size.
func checkPageSize(n int) error {
	if n < 0 || n > math.MaxUint32 {
		return invalid("ERROR_CODE_VALIDATION", fmt.Sprintf("page_size %d is out of range: send 1 to %d, or leave it out for the default", n, uint32(math.MaxUint32)))
	}
	return nil
}

func (e entityRef) check(field string) error {
	if err := rel.ValidateObjectID(e.ID); err != nil {
		return invalid("ERROR_CODE_VALIDATION", field+".id: "+err.Error())
	}
	return nil
}

func (s subjectRef) check(field string) error {
	if err := rel.ValidateSubjectID(s.ID); err != nil {
		return invalid("ERROR_CODE_VALIDATION", field+".id: "+err.Error())
	}
	return nil
}

// checkIDs checks the ids a filter names; subjects may name the wildcard.
func checkIDs(field string, ids []string, subjects bool) error {
	for i, id := range ids {
		err := rel.ValidateObjectID(id)
		if subjects {
			err = rel.ValidateSubjectID(id)
		}
		if err != nil {
			return invalid("ERROR_CODE_VALIDATION", fmt.Sprintf("%s[%d]: %v", field, i, err))
		}
	}
	return nil
}

func (f tupleFilter) check(field string) error {
	if err := checkIDs(field+".entity.ids", f.Entity.IDs, false); err != nil {
		return err
	}
	return checkIDs(field+".subject.ids", f.Subject.IDs, true)
}

func (f attributeFilter) check(field string) error {
	return checkIDs(field+".entity.ids", f.Entity.IDs, false)
}

// page checks a paged request's common fields.
func (p lookupPage) check() error {
	if err := p.Metadata.check(); err != nil {
		return err
	}
	return checkPageSize(p.PageSize)
}

// firstError returns the first non-nil error: the checks of one request, in the order
// of its fields.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
