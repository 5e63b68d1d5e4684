package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The gateway's OpenAPI (Swagger 2.0) document, served at /openapi.json as SpiceDB
// serves its own. It is generated from the descriptors of the services the gateway
// serves, compiled into the binary with authzed-go: each method's google.api.http
// binding is a path, each message and enum it reaches a definition named as
// grpc-gateway names them (`v1CheckPermissionRequest`), so the document always
// describes exactly the API this binary serves. The descriptors carry no comments, so
// neither does the document.
var openAPIServices = []string{
	v1.PermissionsService_ServiceDesc.ServiceName,
	v1.SchemaService_ServiceDesc.ServiceName,
	v1.WatchService_ServiceDesc.ServiceName,
	v1.ExperimentalService_ServiceDesc.ServiceName,
}

// openAPIDocument is built once, on first use.
var openAPIDocument = sync.OnceValues(func() ([]byte, error) {
	g := &openAPIGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, name := range openAPIServices {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			return nil, err
		}
		g.service(d.(protoreflect.ServiceDescriptor), paths)
	}
	return json.MarshalIndent(map[string]any{
		"swagger":             "2.0",
		"info":                map[string]any{"title": "latch: the authzed.api.v1 HTTP/JSON gateway", "version": "1.0"},
		"schemes":             []string{"http", "https"},
		"consumes":            []string{"application/json"},
		"produces":            []string{"application/json"},
		"paths":               paths,
		"definitions":         g.defs,
		"securityDefinitions": map[string]any{"ApiKeyAuth": map[string]any{"type": "apiKey", "name": "Authorization", "in": "header", "description": "a preshared key, prefixed by Bearer: Bearer <preshared-key>"}},
		"security":            []any{map[string]any{"ApiKeyAuth": []string{}}},
	}, "", "  ")
})

// serveOpenAPI answers GET /openapi.json.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := openAPIDocument()
	if err != nil {
		http.Error(w, "the OpenAPI document could not be built", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

type openAPIGen struct {
	defs map[string]any // by definition name; guarded by openAPIDocument's once
}

// service adds the paths of s's methods that have an HTTP binding.
func (g *openAPIGen) service(s protoreflect.ServiceDescriptor, paths map[string]map[string]any) {
	tag := strings.TrimSuffix(string(s.Name()), "Service")
	for i := range s.Methods().Len() {
		m := s.Methods().Get(i)
		rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
		if rule == nil {
			continue
		}
		for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
			verb, path := httpBinding(r)
			if path == "" {
				continue
			}
			if paths[path] == nil {
				paths[path] = map[string]any{}
			}
			paths[path][verb] = g.operation(s, m, tag)
		}
	}
}

func httpBinding(r *annotations.HttpRule) (verb, path string) {
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Post:
		return "post", p.Post
	case *annotations.HttpRule_Get:
		return "get", p.Get
	case *annotations.HttpRule_Put:
		return "put", p.Put
	case *annotations.HttpRule_Delete:
		return "delete", p.Delete
	case *annotations.HttpRule_Patch:
		return "patch", p.Patch
	}
	return "", ""
}

func (g *openAPIGen) operation(s protoreflect.ServiceDescriptor, m protoreflect.MethodDescriptor, tag string) map[string]any {
	out := map[string]any{"$ref": "#/definitions/" + g.message(m.Output())}
	if m.IsStreamingServer() {
		name := "Stream result of " + g.message(m.Output())
		g.defs[name] = map[string]any{"type": "object", "properties": map[string]any{
			"result": map[string]any{"$ref": "#/definitions/" + g.message(m.Output())},
			"error":  map[string]any{"$ref": "#/definitions/" + g.status()},
		}}
		out = map[string]any{"$ref": "#/definitions/" + name}
	}
	return map[string]any{
		"operationId": string(s.Name()) + "_" + string(m.Name()),
		"tags":        []string{tag},
		"parameters": []any{map[string]any{
			"name": "body", "in": "body", "required": true,
			"schema": map[string]any{"$ref": "#/definitions/" + g.message(m.Input())},
		}},
		"responses": map[string]any{
			"200":     map[string]any{"description": "A successful response.", "schema": out},
			"default": map[string]any{"description": "An error response.", "schema": map[string]any{"$ref": "#/definitions/" + g.status()}},
		},
	}
}

// defName names a message or enum as grpc-gateway does: the last part of its package,
// then its name and the names of the messages it is nested in.
func defName(d protoreflect.Descriptor) string {
	pkg := string(d.ParentFile().Package())
	rest := strings.TrimPrefix(string(d.FullName()), pkg+".")
	return pkg[strings.LastIndex(pkg, ".")+1:] + strings.ReplaceAll(rest, ".", "")
}

func (g *openAPIGen) status() string {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName("google.rpc.Status")
	if err != nil {
		g.defs["rpcStatus"] = map[string]any{"type": "object"}
		return "rpcStatus"
	}
	return g.message(d.(protoreflect.MessageDescriptor))
}

// message adds the definition of md (and of everything its fields reach) and
// returns its name.
func (g *openAPIGen) message(md protoreflect.MessageDescriptor) string {
	name := defName(md)
	if _, done := g.defs[name]; done {
		return name
	}
	if md.FullName() == "google.protobuf.Any" {
		g.defs[name] = map[string]any{"type": "object", "properties": map[string]any{"@type": map[string]any{"type": "string"}}, "additionalProperties": map[string]any{}}
		return name
	}
	props := map[string]any{}
	def := map[string]any{"type": "object", "properties": props}
	g.defs[name] = def // before the fields: a message may reach itself
	var oneofs []string
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		props[fd.JSONName()] = g.field(fd)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && !slices.Contains(oneofs, string(o.Name())) {
			oneofs = append(oneofs, string(o.Name()))
		}
	}
	if len(oneofs) > 0 {
		def["description"] = "At most one field of each of these groups is set: " + strings.Join(oneofs, ", ") + "."
	}
	return name
}

func (g *openAPIGen) field(fd protoreflect.FieldDescriptor) map[string]any {
	if fd.IsMap() {
		return map[string]any{"type": "object", "additionalProperties": g.single(fd.MapValue())}
	}
	if fd.IsList() {
		return map[string]any{"type": "array", "items": g.single(fd)}
	}
	return g.single(fd)
}

// single is the schema of one value of fd, as protojson writes it.
func (g *openAPIGen) single(fd protoreflect.FieldDescriptor) map[string]any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return map[string]any{"type": "string", "format": "byte"}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return map[string]any{"type": "integer", "format": "int32"}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return map[string]any{"type": "integer", "format": "int64"}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return map[string]any{"type": "string", "format": "int64"}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return map[string]any{"type": "string", "format": "uint64"}
	case protoreflect.FloatKind:
		return map[string]any{"type": "number", "format": "float"}
	case protoreflect.DoubleKind:
		return map[string]any{"type": "number", "format": "double"}
	case protoreflect.EnumKind:
		return map[string]any{"$ref": "#/definitions/" + g.enum(fd.Enum())}
	}
	return g.wellKnown(fd.Message())
}

// wellKnown is the schema of a message field: protojson's special forms for the
// well-known types, else a reference to the message's definition.
func (g *openAPIGen) wellKnown(md protoreflect.MessageDescriptor) map[string]any {
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return map[string]any{"type": "string", "format": "date-time"}
	case "google.protobuf.Duration":
		return map[string]any{"type": "string"}
	case "google.protobuf.Struct":
		return map[string]any{"type": "object"}
	case "google.protobuf.Value":
		return map[string]any{}
	case "google.protobuf.ListValue":
		return map[string]any{"type": "array", "items": map[string]any{}}
	case "google.protobuf.StringValue":
		return map[string]any{"type": "string"}
	case "google.protobuf.BoolValue":
		return map[string]any{"type": "boolean"}
	case "google.protobuf.UInt32Value", "google.protobuf.Int32Value":
		return map[string]any{"type": "integer"}
	}
	return map[string]any{"$ref": "#/definitions/" + g.message(md)}
}

func (g *openAPIGen) enum(ed protoreflect.EnumDescriptor) string {
	name := defName(ed)
	if _, done := g.defs[name]; done {
		return name
	}
	var values []string
	for i := range ed.Values().Len() {
		values = append(values, string(ed.Values().Get(i).Name()))
	}
	g.defs[name] = map[string]any{"type": "string", "enum": values, "default": values[0]}
	return name
}
