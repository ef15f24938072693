// Package elicitation builds and validates form-mode elicitation schemas for
// the Model Context Protocol method "elicitation/create" (MCP 2025-06-18 and
// 2025-11-25).
//
// A form-mode requestedSchema is a flat JSON object schema whose properties
// are primitives only: strings (optionally with a format), numbers,
// integers, booleans, and the single- and multi-select enum shapes of
// SEP-1330. [Schema] builds such a schema with a fluent API and marshals it
// with the properties in insertion order; [Parse] reads an existing schema
// and rejects anything form mode does not allow.
//
// The client's reply is decoded with [ParseResult] into a [Result], and the
// accepted content is checked with [Schema.Validate], which reports problems
// as [*FieldError] values naming the offending field. [Confirm] and
// [TypeToConfirm] build the two common confirmation dialogs, and
// [Result.Confirmed] answers whether the human really confirmed.
//
//	s := elicitation.NewSchema().
//		String("name", elicitation.Title("Name"), elicitation.Required()).
//		Integer("age", elicitation.Minimum(0))
//	if err := s.Err(); err != nil { ... }
//	// send s as requestedSchema, then:
//	res, err := elicitation.ParseResult(raw)
//	if err == nil && res.Action == elicitation.Accept {
//		err = s.Validate(res.Content)
//	}
package elicitation
