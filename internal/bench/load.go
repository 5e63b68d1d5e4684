package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/bench/dataset"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// Load methods.
const (
	LoadAuto  = "auto"  // bulk import, or write batches when the server lacks it
	LoadBulk  = "bulk"  // ImportBulkRelationships only
	LoadWrite = "write" // WriteRelationships batches with TOUCH only
)

// LoadOptions configure Load.
type LoadOptions struct {
	Method string
	// Batch is the relationships per message (bulk) or per WriteRelationships call (write); default 1000.
	Batch int
	// Chunk is the relationships per bulk import stream, each a transaction on the
	// server; default 1,000,000. Fewer, larger loads cost the server less: each
	// stream's end waits for the server to finish it, and on pebble each load's tables
	// overlap the earlier loads' until they are compacted.
	Chunk int
	// Progress receives a progress bar and the final figure; nil for none.
	Progress io.Writer
}

// LoadStats says what Load did.
type LoadStats struct {
	Relationships int64
	Elapsed       time.Duration
	Method        string
}

// Rate is relationships per second.
func (s LoadStats) Rate() float64 { return float64(s.Relationships) / max(s.Elapsed.Seconds(), 1e-9) }

// Load writes ds's schema, then streams its relationships into the server, never
// holding more than one batch.
func Load(ctx context.Context, conn Conn, ds dataset.Dataset, opt LoadOptions) (LoadStats, error) {
	if opt.Batch <= 0 {
		opt.Batch = 1000
	}
	if opt.Chunk <= 0 {
		opt.Chunk = 1_000_000
	}
	if _, err := v1.NewSchemaServiceClient(conn).WriteSchema(ctx, &v1.WriteSchemaRequest{Schema: ds.Schema()}); err != nil {
		return LoadStats{}, fmt.Errorf("writing the %s schema: %w", ds.Name(), err)
	}
	pc := v1.NewPermissionsServiceClient(conn)
	method := opt.Method
	if method == "" || method == LoadAuto {
		method = LoadBulk
		if !bulkServed(ctx, pc) {
			method = LoadWrite
		}
	}
	bar := newProgress(opt.Progress, ds.Estimate())
	var err error
	if method == LoadBulk {
		err = loadBulk(ctx, pc, ds, opt, bar)
	} else {
		err = loadWrites(ctx, pc, ds, opt, bar)
	}
	st := bar.finish(method)
	if err != nil {
		return st, fmt.Errorf("loading %s after %d relationships: %w", ds.Name(), st.Relationships, err)
	}
	return st, nil
}

// bulkServed probes ImportBulkRelationships with an empty import, which changes nothing.
func bulkServed(ctx context.Context, pc v1.PermissionsServiceClient) bool {
	st, err := pc.ImportBulkRelationships(ctx)
	if err == nil {
		_, err = st.CloseAndRecv()
	}
	return status.Code(err) != codes.Unimplemented
}

func loadBulk(ctx context.Context, pc v1.PermissionsServiceClient, ds dataset.Dataset, opt LoadOptions, bar *progress) error {
	var stream v1.PermissionsService_ImportBulkRelationshipsClient
	batch := make([]rel.Relationship, 0, opt.Batch)
	inStream := 0
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		msg, err := importMessage(batch)
		if err != nil {
			return err
		}
		if stream == nil {
			if stream, err = pc.ImportBulkRelationships(ctx, grpc.ForceCodecV2(importCodec{encoding.GetCodecV2(protoenc.Name)})); err != nil {
				return err
			}
		}
		if err := stream.SendMsg(msg); err != nil {
			_, cerr := stream.CloseAndRecv() // the server's reason, when it ended the stream
			return errors.Join(err, cerr)
		}
		inStream += len(batch)
		clear(batch) // drop the generator's strings
		batch = batch[:0]
		return nil
	}
	commit := func() error {
		if err := send(); err != nil || stream == nil {
			return err
		}
		_, err := stream.CloseAndRecv()
		bar.add(int64(inStream))
		stream, inStream = nil, 0
		return err
	}
	err := ds.Generate(func(r rel.Relationship) error {
		batch = append(batch, r)
		if len(batch) < opt.Batch {
			return nil
		}
		if err := send(); err != nil {
			return err
		}
		if inStream >= opt.Chunk {
			return commit()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return commit()
}

// importMessage is the ImportBulkRelationshipsRequest of rels: its bytes, written
// without the generated code's objects and reflection where relv1 can, at a quarter
// of their CPU, which the generator leaves to the server it shares the machine with;
// the generated message otherwise.
func importMessage(rels []rel.Relationship) (any, error) {
	if b, ok := relv1.AppendImportRequest(make([]byte, 0, 64*len(rels)), rels); ok {
		return wireMessage(b), nil
	}
	msg := &v1.ImportBulkRelationshipsRequest{Relationships: make([]*v1.Relationship, len(rels))}
	for i, r := range rels {
		w, err := relv1.Relationship(r)
		if err != nil {
			return nil, err
		}
		msg.Relationships[i] = w
	}
	return msg, nil
}

// wireMessage is a message's encoded bytes, which importCodec sends as they are. gRPC
// may still be sending them after SendMsg returns: they must not be reused.
type wireMessage []byte

// importCodec is gRPC's proto codec but for a wireMessage.
type importCodec struct{ encoding.CodecV2 }

func (c importCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(wireMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(w)}, nil
	}
	return c.CodecV2.Marshal(v)
}

func loadWrites(ctx context.Context, pc v1.PermissionsServiceClient, ds dataset.Dataset, opt LoadOptions, bar *progress) error {
	updates := make([]*v1.RelationshipUpdate, 0, opt.Batch)
	flush := func() error {
		if len(updates) == 0 {
			return nil
		}
		if _, err := pc.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: updates}); err != nil {
			return err
		}
		bar.add(int64(len(updates)))
		updates = updates[:0]
		return nil
	}
	err := ds.Generate(func(r rel.Relationship) error {
		wire, err := relv1.Relationship(r)
		if err != nil {
			return err
		}
		updates = append(updates, &v1.RelationshipUpdate{Operation: v1.RelationshipUpdate_OPERATION_TOUCH, Relationship: wire})
		if len(updates) == opt.Batch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// WriteFile writes ds as one relationship per line in latch's relationship syntax.
func WriteFile(w io.Writer, ds dataset.Dataset, progressTo io.Writer) (LoadStats, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	bar := newProgress(progressTo, ds.Estimate())
	var n int64
	err := ds.Generate(func(r rel.Relationship) error {
		bw.WriteString(rel.String(r))
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
		if n++; n%10_000 == 0 {
			bar.add(10_000)
		}
		return nil
	})
	bar.add(n % 10_000)
	if err == nil {
		err = bw.Flush()
	}
	return bar.finish("file"), err
}

// progress draws a bar on a terminal-like writer, redrawn a few times a second.
type progress struct {
	w        io.Writer
	estimate int64
	start    time.Time
	done     atomic.Int64
	lastDraw time.Time
}

func newProgress(w io.Writer, estimate int) *progress {
	return &progress{w: w, estimate: int64(estimate), start: time.Now()}
}

func (p *progress) add(n int64) {
	done := p.done.Add(n)
	if p.w == nil || time.Since(p.lastDraw) < 200*time.Millisecond {
		return
	}
	p.lastDraw = time.Now()
	frac := min(float64(done)/float64(max(p.estimate, 1)), 1)
	filled := int(frac * 30)
	rate := float64(done) / max(time.Since(p.start).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %d relationships, %.0f/s ", strings.Repeat("#", filled), strings.Repeat(".", 30-filled), frac*100, done, rate)
}

func (p *progress) finish(method string) LoadStats {
	st := LoadStats{Relationships: p.done.Load(), Elapsed: time.Since(p.start), Method: method}
	if p.w != nil {
		fmt.Fprintf(p.w, "\r[%s] %d relationships in %.1fs: %.0f relationships/s (%s)\n",
			strings.Repeat("#", 30), st.Relationships, st.Elapsed.Seconds(), st.Rate(), describeMethod(method))
	}
	return st
}

func describeMethod(m string) string {
	switch m {
	case LoadBulk:
		return "ImportBulkRelationships"
	case LoadWrite:
		return "WriteRelationships batches of TOUCH"
	}
	return m
}
