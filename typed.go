package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// TypedHandler runs a tool whose arguments decode into In and whose result
// is an Out.
type TypedHandler[In, Out any] func(ctx context.Context, call *ToolCall, in In) (Out, error)

// NewTool returns t with its input schema derived from In, its output schema
// derived from Out (when Out is a struct or a map), and a Handler that
// decodes the arguments into In and sends the Out it returns as
// structuredContent together with its JSON text (an Out of type string is
// sent as plain text).
//
// The schemas follow github.com/google/jsonschema-go: exported fields by
// their json names, fields without omitempty/omitzero required, unknown
// properties refused, a `jsonschema:"…"` tag as the description. Schemas
// already set on t are kept. The handler validates the arguments of every
// call against the input schema in use before [Config.BeforeCall] runs,
// as it does for a hand-written one (see [Tool.InputSchema]): a call with
// invalid arguments does not run and gets a bad_args tool error naming
// the field.
//
// NewTool panics if In or Out cannot be described by a JSON Schema, or if
// a schema set on t cannot be compiled (a programming error, like
// [regexp.MustCompile]).
func NewTool[In, Out any](t Tool, fn TypedHandler[In, Out]) Tool {
	if len(t.InputSchema) == 0 {
		t.InputSchema = mustSchema[In](t.Name, "input")
	}
	if p := compileSchema(t.InputSchema).inputProblem(); p != "" {
		panic(fmt.Sprintf("mcphandler: tool %q: %s", t.Name, p))
	}
	if len(t.OutputSchema) == 0 && isObjectType(reflect.TypeFor[Out]()) {
		t.OutputSchema = mustSchema[Out](t.Name, "output")
	}
	t.Handler = typedHandler(fn, len(t.OutputSchema) > 0)
	return t
}

// typedHandler is the Handler of a typed tool: it decodes the arguments
// into In, runs fn and encodes its Out (as structured content too, when
// the tool has an output schema).
func typedHandler[In, Out any](fn TypedHandler[In, Out], structured bool) func(context.Context, *ToolCall) (*ToolResult, error) {
	return func(ctx context.Context, call *ToolCall) (*ToolResult, error) {
		var args In
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return nil, BadArgs("%s", decodeError(err))
		}
		out, err := fn(ctx, call, args)
		if err != nil {
			return nil, err
		}
		if s, ok := any(out).(string); ok {
			return TextResult(s), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		r := &ToolResult{Content: []Content{TextContent(string(b))}}
		if structured {
			r.StructuredContent = json.RawMessage(b)
		}
		return r, nil
	}
}

func isObjectType(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct || (t.Kind() == reflect.Map && t.Key().Kind() == reflect.String)
}

func mustSchema[T any](tool, which string) json.RawMessage {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcphandler: tool %q: %s schema: %v", tool, which, err))
	}
	if s.Type == "" && len(s.Types) == 0 {
		s.Type = "object"
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("mcphandler: tool %q: %s schema: %v", tool, which, err))
	}
	return b
}

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// schemaError shortens a jsonschema validation error to what names the
// field: "validating root: validating /properties/limit: type: …" becomes
// "limit: type: …".
func schemaError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "validating /properties/"); i >= 0 {
		msg = msg[i+len("validating /properties/"):]
		msg = strings.Replace(msg, "/properties/", ".", -1)
		return strings.TrimPrefix(msg, ": ")
	}
	return strings.TrimPrefix(msg, "validating root: ")
}

// decodeError turns a json decoding error into a message naming the field.
func decodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + ": must be " + te.Type.String()
	}
	return "arguments do not match the input schema"
}
